"""The born-digital fast lane on every born-digital dev document: what it extracts is the page's
own text layer, word for word, and tables come out as Markdown tables that quote the page."""

from __future__ import annotations

import pymupdf
import pytest

from bench.accuracy import order_scores, word_scores
from tests.support.documents import BUNDLED_DATA, dev_file
from workers.content.order import reading_order
from workers.engines import textlayer

BORN_DIGITAL = [
    "multi_page.pdf",
    "code_and_formula.pdf",
    "table_page_2305.03393v1-pg9.pdf",
    pytest.param("table_nics-background-checks-2015-11.pdf", marks=pytest.mark.slow),  # seconds: make test only
]


def _extract(name: str) -> list[tuple[pymupdf.Page, list]]:
    doc = pymupdf.open(dev_file(name))
    return [(page, textlayer.extract(page, 200, textlayer.TextLayerConfig())) for page in doc]


@pytest.mark.parametrize("name", BORN_DIGITAL)
def test_every_word_of_the_text_layer_once(name):
    for page, regions in _extract(name):
        assert textlayer.has_text_layer(page, 32)
        got = "\n".join(text.text for _, text in regions)
        score = word_scores(got, " ".join(w[4] for w in page.get_text("words")))
        assert score.f1 >= 0.99, (name, page.number, score)


def _grid(text) -> dict[tuple[int, int], dict]:
    return {(c["row"], c["col"]): c for c in text.table["cells"]}


def test_table_split_into_rows_where_rulings_group_five_states():
    """The NICS table is ruled every five states; each state is a row of its own, its title
    stays out of the grid, and its group headings span their sub-columns."""
    [(_, regions)] = _extract("table_nics-background-checks-2015-11.pdf")
    [text] = [text for box, text in regions if box.label == "table"]
    cells = _grid(text)
    rows = {}
    for (r, _c), cell in sorted(cells.items()):
        rows.setdefault(r, []).append(cell["text"])
    assert text.text.startswith("NICS Firearm Background Checks November - 2015\n\n<table>")
    assert rows[text.table["header_rows"]][:5] == ["Alabama", "18,870", "23,022", "22,650", "859"]
    assert sum(1 for r in rows.values() if r[0] == "Wyoming") == 1
    assert all(cell["bbox"] is not None for cell in cells.values() if cell["text"])


def test_table_cells_keep_decimal_numbers_whole():
    """find_tables' own cell text splits "0.965" into "0965" and "."; the page's words do not.
    The two-line header keeps its spans: "Language" down both lines, "TEDs" over three columns."""
    [(_, regions)] = _extract("table_page_2305.03393v1-pg9.pdf")
    [text] = [text for box, text in regions if box.label == "table"]
    assert "0.965" in text.text and "0965" not in text.text
    cells = _grid(text)
    assert text.table["header_rows"] == 2
    assert cells[(0, 2)]["text"] == "Language" and cells[(0, 2)]["rowspan"] == 2
    assert cells[(0, 3)]["text"] == "TEDs" and cells[(0, 3)]["colspan"] == 3
    assert [cells[(2, c)]["text"] for c in range(3)] == ["6", "6", "OTSL HTML"]


@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
def test_pages_stored_with_rotate_give_boxes_on_the_page_as_displayed(rotation):
    """Six lines that read top to bottom on screen, on a page stored with /Rotate: extraction
    reports unrotated coordinates, which would put the boxes off the displayed page and, for
    270, read the lines bottom to top."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.set_rotation(rotation)
    for i in range(6):
        at = pymupdf.Point(60, 60 + 40 * i) * page.derotation_matrix
        page.insert_text(at, f"Line number {i} of a turned page", fontsize=11, rotate=rotation)
    regions = textlayer.extract(page, 144, textlayer.TextLayerConfig())
    width, height = page.rect.width * 2, page.rect.height * 2
    for box, _ in regions:
        x0, y0, x1, y1 = box.bbox
        assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height, (box.bbox, width, height)
    ordered = [regions[i][1].text for i in reading_order([box.bbox for box, _ in regions])]
    assert " ".join(ordered).split("Line number ")[1:] == [f"{i} of a turned page " for i in range(5)] + [
        "5 of a turned page"
    ]


# Hand-checked gold (tests/data/gold/README.md): the page as a reader reads it, typed from the
# rendered page, so the fast lane is scored against the page and not against PyMuPDF itself.
GOLD = [("multi_page.pdf", 1, "multi_page.p2.txt"), ("multi_page.pdf", 4, "multi_page.p5.txt")]


def _in_reading_order(regions: list) -> str:
    order = reading_order([box.bbox for box, _ in regions])
    return "\n".join(regions[i][1].text for i in order)


@pytest.mark.parametrize(("name", "index", "gold"), GOLD)
def test_text_layer_matches_hand_checked_gold_in_reading_order(name, index, gold):
    reference = (BUNDLED_DATA / "gold" / gold).read_text()
    page = pymupdf.open(dev_file(name))[index]
    got = _in_reading_order(textlayer.extract(page, 200, textlayer.TextLayerConfig()))
    words, order = word_scores(got, reference), order_scores(got, reference)
    assert words.f1 >= 0.99, words
    assert order.f1 >= 0.99, order


def test_order_metric_sees_what_the_bag_of_words_cannot():
    """The same page with its paragraphs read bottom-up: every word still there (bag F1 1.0),
    the order-aware score falls."""
    reference = (BUNDLED_DATA / "gold" / "multi_page.p2.txt").read_text()
    shuffled = "\n\n".join(reversed(reference.split("\n\n")))
    assert word_scores(shuffled, reference).f1 == 1.0
    assert order_scores(shuffled, reference).f1 < 0.6
    assert order_scores(reference, reference).f1 == 1.0


@pytest.mark.parametrize("name", ["multi_page.pdf", "code_and_formula.pdf"])
def test_prose_pages_give_no_table(name):
    for _page, regions in _extract(name):
        assert [box.label for box, _ in regions].count("table") == 0


def test_whitespace_aligned_table_without_rulings():
    """An expenditure listing aligned by spaces only, one description wrapping onto a second
    line: a table of its rows, the wrapped line in its row, the prose above left as text."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((60, 60), "Quarterly expenditure report for the office, prose above the table.", fontsize=10)
    rows = [
        ("Doc No.", "Date", "Payee", "Description", "Amount"),
        ("A-101", "01/02/15", "ACME CORP", "OFFICE SUPPLIES", "120.00"),
        ("A-102", "01/05/15", "WIDGET LTD", "TRAVEL EXPENSES", "1,980.50"),
        (None, None, None, "AND LODGING", None),
        ("A-103", "01/09/15", "FOO INC", "PRINTING", "45.10"),
    ]
    for i, row in enumerate(rows):
        for x, text in zip((60, 130, 200, 300, 450), row, strict=True):
            if text:
                page.insert_text((x, 100 + 14 * i), text, fontsize=9)
    regions = textlayer.extract(page, 72, textlayer.TextLayerConfig())
    [table] = [text for box, text in regions if box.label == "table"]
    assert table.text.splitlines()[0] == "| Doc No. | Date | Payee | Description | Amount |"
    assert "| A-102 | 01/05/15 | WIDGET LTD | TRAVEL EXPENSES AND LODGING | 1,980.50 |" in table.text
    assert (table.table["rows"], table.table["cols"], table.table["header_rows"]) == (4, 5, 1)
    assert [text.text for box, text in regions if box.label == "text"] == [
        "Quarterly expenditure report for the office, prose above the table."
    ]


def test_ruled_header_over_whitespace_body():
    """The expenditure-report shape: the header row boxed and ruled, the body aligned by spaces
    only, a description wrapping onto a second line. Every row keeps its own cells (the failure
    this guards against put the whole body into one cell under a ruled header)."""
    doc = pymupdf.open()
    page = doc.new_page()
    xs = (60, 120, 180, 260, 310, 360, 500)
    page.draw_rect(pymupdf.Rect(55, 80, 560, 98), color=(0, 0, 0), width=0.5)
    for x in xs[1:]:
        page.draw_line((x - 5, 80), (x - 5, 98), color=(0, 0, 0), width=0.5)
    for x, head in zip(xs, ("DOC NO.", "DATE", "PAYEE", "START", "END", "DESCRIPTION", "AMOUNT"), strict=True):
        page.insert_text((x, 93), head, fontsize=7)
    rows = [
        ("A1001", "01/02/15", "ACME CORP", "01/01/15", "01/31/15", "OFFICE SUPPLIES", "120.00"),
        ("A1002", "01/05/15", "WIDGET LTD", "01/01/15", "01/31/15", "TRAVEL EXPENSES", "1,980.50"),
        (None, None, None, None, None, "AND LODGING", None),
        ("A1003", "01/09/15", "FOO INC", "01/01/15", "12/31/15", "PRINTING", "45.10"),
    ]
    for i, row in enumerate(rows):
        for x, text in zip(xs, row, strict=True):
            if text:
                page.insert_text((x, 112 + 12 * i), text, fontsize=7)
    page.draw_line((55, 165), (560, 165), color=(0, 0, 0), width=0.5)
    [table] = [text for box, text in textlayer.extract(page, 72, textlayer.TextLayerConfig()) if box.label == "table"]
    lines = table.text.splitlines()
    assert lines[0] == "| DOC NO. | DATE | PAYEE | START | END | DESCRIPTION | AMOUNT |"
    assert (
        lines[3] == "| A1002 | 01/05/15 | WIDGET LTD | 01/01/15 | 01/31/15 | TRAVEL EXPENSES AND LODGING | 1,980.50 |"
    )
    assert (table.table["rows"], table.table["cols"]) == (4, 7)
