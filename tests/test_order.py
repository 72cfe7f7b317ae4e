"""Reading order: XY-cut unit cases, and a generated two-column page read through the worker
both from its text layer and, rasterised, through OCR — column 1 entirely before column 2."""

from __future__ import annotations

import pymupdf
import pytest

from tests.conftest import upload, wait_for_job
from workers.content.order import reading_order

# --- unit cases (page pixels: x0, y0, x1, y1) ----------------------------------------------------

TITLE = (100, 50, 1100, 100)


def _rows(x0: float, x1: float, tops: list[float], height: float = 60) -> list[tuple]:
    return [(x0, y, x1, y + height) for y in tops]


def test_empty_and_single():
    assert reading_order([]) == []
    assert reading_order([(0, 0, 10, 10)]) == [0]


def test_single_column_top_to_bottom():
    boxes = [(100, 400, 1100, 500), (100, 100, 1100, 200), (100, 250, 900, 350)]
    assert reading_order(boxes) == [1, 2, 0]


def test_two_columns_whose_paragraphs_line_up_row_by_row():
    """The case a band-first cut gets wrong: every row is its own horizontal band."""
    left = _rows(100, 560, [150, 250, 350, 450])
    right = _rows(640, 1100, [150, 250, 350, 450])
    boxes = [TITLE, *[b for pair in zip(left, right, strict=True) for b in pair]]  # interleaved input
    order = reading_order(boxes)
    assert order[0] == 0
    assert [boxes[i] for i in order[1:]] == left + right


def test_left_column_longer_than_right():
    left = _rows(100, 560, [150, 250, 350, 450, 550])
    right = _rows(640, 1100, [150, 250, 350])
    boxes = right + left
    assert [boxes[i] for i in reading_order(boxes)] == left + right


def test_full_width_block_between_two_column_sections():
    top_left, top_right = _rows(100, 560, [150, 250]), _rows(640, 1100, [150, 250])
    wide = (100, 350, 1100, 420)
    low_left, low_right = _rows(100, 560, [450, 550]), _rows(640, 1100, [450, 550])
    boxes = [*low_right, wide, *top_right, *low_left, TITLE, *top_left]
    expected = [TITLE, *top_left, *top_right, wide, *low_left, *low_right]
    assert [boxes[i] for i in reading_order(boxes)] == expected


def test_loose_boxes_that_overlap_a_little_still_split():
    # Layout boxes overlap their neighbours by a few pixels; that is not a shared block.
    boxes = [(100, 100, 563, 200), (560, 100, 1100, 200), (100, 203, 563, 300), (560, 198, 1100, 300)]
    assert reading_order(boxes) == [0, 2, 1, 3]


def test_loose_stacked_boxes_read_top_to_bottom():
    """A title box whose bottom runs into the paragraph below it (no gap) still comes first,
    even though the paragraph starts further left."""
    boxes = [(30, 60, 950, 300), (60, 10, 900, 75)]
    assert reading_order(boxes) == [1, 0]


def test_same_row_without_any_gap_reads_left_to_right():
    boxes = [(500, 100, 900, 160), (100, 105, 520, 160)]
    assert reading_order(boxes) == [1, 0]


# --- through the worker ---------------------------------------------------------------------------

COLUMN_1 = [
    "Apples ripen slowly in the northern orchards during the cool autumn months.",
    "Farmers pick them by hand and store them in wooden crates near the barn.",
    "Cider presses run day and night once the harvest reaches its peak.",
    "Orchard owners prune every tree in winter to keep the branches strong.",
]
COLUMN_2 = [
    "Rivers carry melted snow from the mountains down to the distant sea.",
    "Fishermen cast their nets where the current slows behind large rocks.",
    "Bridges of stone cross the water at each village along the valley.",
    "Boats moored at the harbour wait for the morning tide to turn.",
]


def two_column_pdf() -> bytes:
    """A full-width title over two columns whose paragraphs sit side by side, row by row."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_textbox(pymupdf.Rect(60, 60, 535, 100), "Notes on Orchards and Rivers", fontsize=20, align=1)
    for x0, sentences in ((60, COLUMN_1), (315, COLUMN_2)):
        for row, sentence in enumerate(sentences):
            y = 130 + 90 * row
            assert page.insert_textbox(pymupdf.Rect(x0, y, x0 + 220, y + 80), sentence, fontsize=11) >= 0
    data = doc.tobytes()
    doc.close()
    return data


def _assert_columns_in_order(markdown: str) -> None:
    text = " ".join(markdown.split())
    positions = []
    for sentence in COLUMN_1 + COLUMN_2:
        # The first five words locate a paragraph even if OCR misreads a later one.
        start = " ".join(sentence.split()[:5])
        assert start in text, (start, markdown)
        positions.append(text.index(start))
    assert positions == sorted(positions), f"columns interleave:\n{markdown}"
    assert text.index("Notes on Orchards and Rivers") < positions[0]


@pytest.mark.django_db(transaction=True)
def test_two_column_page_from_text_layer(api, worker):
    resp = upload(api, "two-columns.pdf", data=two_column_pdf())
    assert resp.status_code == 202, resp.content
    done = wait_for_job(api, resp.json()["id"])
    assert done["status"] == "done", done
    _assert_columns_in_order(api.get(f"/api/v1/jobs/{done['id']}/result").content.decode())


@pytest.mark.django_db(transaction=True)
def test_two_column_page_rasterised_through_ocr(api, worker):
    with pymupdf.open(stream=two_column_pdf(), filetype="pdf") as doc:
        png = doc[0].get_pixmap(dpi=200).tobytes("png")
    resp = upload(api, "two-columns.png", data=png)
    assert resp.status_code == 202, resp.content
    done = wait_for_job(api, resp.json()["id"])
    assert done["status"] == "done", done
    _assert_columns_in_order(api.get(f"/api/v1/jobs/{done['id']}/result").content.decode())
