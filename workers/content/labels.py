"""Label corrections that need the recognized lines, which layout detection does not see."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Protocol


class Line(Protocol):
    @property
    def bbox(self) -> tuple[float, float, float, float]: ...


class Read(Protocol):
    """What a recognizer read in one region (``workers.engines.base.RegionText`` is one): content
    rules take the shape they use, not the engines' types, so nothing here points up at engines."""

    @property
    def lines(self) -> Sequence[Line]: ...


# A title printed no taller than the body text, over several lines, is the start of a paragraph
# that the CDLA detector split off (phototest.tif's first two lines); one-line bold headings of
# body size are real headings and stay.
TITLE_HEIGHT_RATIO = 1.15
TITLE_MIN_LINES = 2


def false_titles(labels: Sequence[str], texts: Sequence[Read]) -> set[int]:
    """Indices of regions labelled ``title`` that read like body text."""
    # The page's own print size: the median over all its lines (body text dominates a page, and a
    # page whose only regions are "titles" is measured against itself).
    body = [_height(line.bbox) for text in texts for line in text.lines]
    if len(body) < 3:
        return set()
    body_height = statistics.median(body)
    out = set()
    for i, (label, text) in enumerate(zip(labels, texts, strict=True)):
        if label != "title" or len(text.lines) < TITLE_MIN_LINES:
            continue
        if statistics.median(_height(line.bbox) for line in text.lines) < TITLE_HEIGHT_RATIO * body_height:
            out.add(i)
    return out


def _height(bbox: tuple[float, float, float, float]) -> float:
    return bbox[3] - bbox[1]
