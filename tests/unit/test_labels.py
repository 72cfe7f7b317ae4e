"""A multi-line "title" in body-size print is a paragraph; a one-line heading stays a title."""

from __future__ import annotations

from workers.content.labels import false_titles
from workers.engines.base import RegionText, TextLine


def _region(*rows: tuple[float, float]) -> RegionText:
    lines = tuple(TextLine(text="word", bbox=(0.0, top, 100.0, top + height)) for top, height in rows)
    return RegionText(text="\n".join("word" for _ in rows), lines=lines)


def test_body_size_multiline_title_is_demoted_and_real_headings_stay():
    body = _region((200, 20), (230, 20), (260, 20), (290, 20))
    split_paragraph = _region((100, 20), (130, 21))  # phototest.tif: CDLA's "title"
    one_line_heading = _region((50, 20))  # bold heading at body size: a real heading
    big_title = _region((10, 40), (55, 40))  # two lines, twice the body height
    labels = ["text", "title", "title", "title"]
    assert false_titles(labels, [body, split_paragraph, one_line_heading, big_title]) == {1}


def test_a_page_of_only_titles_is_measured_against_itself():
    a, b = _region((0, 20), (30, 20)), _region((60, 20), (90, 20), (120, 20))
    assert false_titles(["title", "title"], [a, b]) == {0, 1}


def test_too_few_lines_to_judge():
    assert false_titles(["title"], [_region((0, 20), (30, 20))]) == set()
