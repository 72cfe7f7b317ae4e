"""The born-digital fast lane on every born-digital dev document: what it extracts is the page's
own text layer, word for word, and tables come out as Markdown tables that quote the page."""

from __future__ import annotations

import pymupdf
import pytest

from tests.conftest import BUNDLED_DATA, dev_file
from workers.content.accuracy import order_scores, word_scores
from workers.content.order import reading_order
from workers.engines import textlayer

BORN_DIGITAL = [
    "multi_page.pdf",
    "code_and_formula.pdf",
    "table_page_2305.03393v1-pg9.pdf",
    "table_nics-background-checks-2015-11.pdf",
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


def test_table_split_into_rows_where_rulings_group_five_states():
    """The NICS table is ruled every five states; each state is a row of its own."""
    [(_, regions)] = _extract("table_nics-background-checks-2015-11.pdf")
    tables = [text.text for box, text in regions if box.label == "table"]
    assert len(tables) == 1
    rows = tables[0].splitlines()
    assert rows[1].startswith("|---|")
    assert "| Alabama | 18,870 | 23,022 | 22,650 | 859 |" in tables[0]
    assert "| Alaska | 209 | 3,062 | 3,209 | 191 |" in tables[0]
    assert sum(1 for r in rows if r.startswith("| Wyoming |")) == 1


def test_table_cells_keep_decimal_numbers_whole():
    """find_tables' own cell text splits "0.965" into "0965" and "."; the page's words do not."""
    [(_, regions)] = _extract("table_page_2305.03393v1-pg9.pdf")
    [table] = [text.text for box, text in regions if box.label == "table"]
    assert "0.965" in table and "0965" not in table
    assert table.splitlines()[0].startswith("| # enc-layers | # dec-layers | Language | TEDs |")


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
