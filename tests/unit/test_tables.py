"""Table structure on positioned words and markup: grids from words, HTML and Markdown parsed
into the same cells, the grid in the JSON and Markdown outputs.

TEDS against hand-checked ground truth on the dev table pages is tests/test_table_accuracy.py."""

from __future__ import annotations

from bench.accuracy import teds
from workers.content import formats, tables

W = tables.Word


def _row(y: float, *cells: tuple[float, str], h: float = 10) -> list[tables.Word]:
    return [W(x, y, x + 6 * len(t), y + h, t) for x, t in cells]


def test_whitespace_grid_with_wrapped_cell_and_header():
    """A header, then rows whose description wraps onto a second line: the wrapped line stays in
    its row, and the amount column stays a column of its own."""
    words = [
        *_row(0, (0, "No."), (60, "Date"), (140, "Payee"), (260, "Amount")),
        *_row(20, (0, "101"), (60, "03/01"), (140, "Acme Corp"), (260, "1,200.00")),
        *_row(34, (140, "and partners")),
        *_row(54, (0, "102"), (60, "03/02"), (140, "Widget Ltd"), (260, "80.50")),
    ]
    grid = tables.grid_from_words(words)
    assert (grid.n_rows, grid.n_cols, grid.header_rows) == (3, 4, 1)
    cells = {(c.row, c.col): c for c in grid.cells}
    assert cells[(1, 2)].text == "Acme Corp and partners"
    assert cells[(1, 3)].text == "1,200.00" and cells[(2, 0)].text == "102"
    assert cells[(1, 2)].bbox == (140, 20, 140 + 6 * len("and partners"), 44)
    assert tables.to_markdown(grid).splitlines()[:3] == [
        "| No. | Date | Payee | Amount |",
        "|---|---|---|---|",
        "| 101 | 03/01 | Acme Corp and partners | 1,200.00 |",
    ]


def test_prose_in_one_column_is_no_grid():
    words = [W(0, 14 * i, 300, 14 * i + 10, "a line of ordinary running text here") for i in range(6)]
    assert tables.grid_from_words(words) is None


def test_html_with_spans_parses_to_the_same_cells_it_renders():
    html = (
        "<table><thead><tr><th rowspan='2'>Name</th><th colspan='2'>Score</th></tr>"
        "<tr><th>A</th><th>B</th></tr></thead><tbody><tr><td>x &amp; y</td><td>1</td><td>2</td></tr></tbody></table>"
    )
    grid = tables.parse_html(html)
    assert (grid.n_rows, grid.n_cols, grid.header_rows) == (3, 3, 2)
    cells = {(c.row, c.col): c for c in grid.cells}
    assert cells[(0, 0)].rowspan == 2 and cells[(0, 1)].colspan == 2
    assert cells[(1, 1)].text == "A" and cells[(1, 2)].text == "B"
    assert cells[(2, 0)].text == "x & y"
    again = tables.parse_html(tables.to_markdown(grid))  # spans: the Markdown is HTML
    assert tables.to_dict(again) == tables.to_dict(grid)
    assert teds(tables.to_html(grid, th=False), tables.to_html(again, th=False)) == 1.0


def test_markdown_table_parses_with_its_header_row():
    grid = tables.parse_markup("| a | b |\n|---|:-:|\n| 1 | 2 \\| 3 |\n| 4 |")
    assert (grid.n_rows, grid.n_cols, grid.header_rows) == (3, 2, 1)
    assert [c.text for c in grid.cells] == ["a", "b", "1", "2 | 3", "4", ""]
    assert tables.parse_markup("just text") is None


def test_json_and_markdown_carry_the_grid():
    grid = tables.grid_from_words(
        [*_row(0, (0, "k"), (60, "v")), *_row(20, (0, "a"), (60, "1")), *_row(40, (0, "b"), (60, "2"))]
    )
    region = {"order": 0, "label": "table", "bbox": (0, 0, 70, 50), "text": tables.to_markdown(grid)}
    page = {"index": 0, "width": 100, "height": 100, "dpi": 72, "source": "ocr", "regions": []}
    page["regions"] = [{**region, "table": tables.to_dict(grid)}]
    import json

    out = json.loads(formats.to_json({"id": "x"}, [page]))
    cells = out["pages"][0]["regions"][0]["table"]["cells"]
    assert [(c["row"], c["col"], c["text"]) for c in cells][:2] == [(0, 0, "k"), (0, 1, "v")]
    assert cells[2]["bbox"] == [0, 20, 6, 30]
    assert formats.to_markdown([page]).startswith("| k | v |\n|---|---|\n| a | 1 |")
