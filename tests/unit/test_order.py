"""Reading order on boxes alone: XY-cut cases in page pixels (x0, y0, x1, y1).

A whole page read through the worker is tests/test_order_pipeline.py."""

from __future__ import annotations

from workers.content.order import reading_order

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
