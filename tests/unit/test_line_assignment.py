"""Lines from the full-page OCR pass are given to layout regions; none is ever dropped."""

from __future__ import annotations

from workers.content.formats import to_markdown
from workers.engines.base import LayoutBox, TextLine
from workers.engines.cpu import assign_lines


def _line(text: str, x0: float, y0: float, x1: float, y1: float) -> TextLine:
    return TextLine(text=text, bbox=(x0, y0, x1, y1), confidence=0.9)


def test_lines_go_to_the_region_holding_most_of_them_in_reading_order():
    regions = [LayoutBox("title", (100, 50, 900, 100), 0.9), LayoutBox("text", (100, 150, 900, 400), 0.9)]
    lines = [
        _line("second line of the paragraph", 105, 210, 880, 240),
        _line("A Title", 110, 55, 400, 95),
        _line("first line", 105, 160, 500, 190),
        _line("and its right half", 520, 162, 880, 192),  # same row, read after its left neighbour
    ]
    got = assign_lines(lines, regions)
    assert [t.text for t in got.texts] == ["A Title", "first line and its right half\nsecond line of the paragraph"]
    assert got.extra == []


def test_lines_outside_every_region_become_flagged_regions():
    regions = [LayoutBox("text", (100, 100, 900, 300), 0.9)]
    lines = [
        _line("inside", 110, 110, 300, 140),
        _line("a margin note", 950, 500, 1200, 530),
        _line("over two lines", 950, 540, 1180, 570),
        _line("a stray footer far below", 100, 1500, 600, 1530),
    ]
    got = assign_lines(lines, regions)
    assert [t.text for t in got.texts] == ["inside"]
    extra = {text.text: (box, text.flags) for box, text in got.extra}
    assert set(extra) == {"a margin note\nover two lines", "a stray footer far below"}
    for box, flags in extra.values():
        assert flags == ("outside-layout",) and box.label == "text"
    assert extra["a margin note\nover two lines"][0].bbox == (950, 500, 1200, 570)


def test_words_printed_over_a_figure_are_kept_as_text():
    regions = [LayoutBox("figure", (100, 100, 900, 600), 0.9), LayoutBox("figure_caption", (100, 610, 900, 650), 0.9)]
    lines = [_line("Revenue 2024", 300, 120, 600, 150), _line("Figure 1: sales", 110, 615, 500, 645)]
    got = assign_lines(lines, regions)
    assert [t.text for t in got.texts] == ["", "Figure 1: sales"]
    assert [t.text for _, t in got.extra] == ["Revenue 2024"]
    page = {
        "index": 0,
        "regions": [
            {"order": 0, "label": "figure", "text": ""},
            {"order": 1, "label": "figure_caption", "text": "Figure 1: sales"},
            {"order": 2, "label": "text", "text": "Revenue 2024", "flags": ["outside-layout"]},
        ],
    }
    markdown = to_markdown([page])
    assert "![Figure 1: sales](#page-1-region-0)" in markdown and "Revenue 2024" in markdown
