"""Reading order by recursive XY-cut.

Columns are cut first: a vertical gap that runs the full height of a block splits it into
columns read left to right, so the lines of a two-column page never interleave. Where no column
gap exists, horizontal gaps split the block into bands read top to bottom.
"""

from __future__ import annotations

from collections.abc import Sequence

Box = tuple[float, float, float, float]


def reading_order(boxes: Sequence[Box], min_gap: float = 4.0) -> list[int]:
    """Indices of ``boxes`` in reading order."""
    return _cut(list(range(len(boxes))), boxes, min_gap)


def _cut(idxs: list[int], boxes: Sequence[Box], min_gap: float) -> list[int]:
    if len(idxs) <= 1:
        return idxs
    for axis in (0, 1):  # 0: split into columns (x), 1: split into bands (y)
        groups = _split(idxs, boxes, axis, min_gap)
        if len(groups) > 1:
            return [i for g in groups for i in _cut(g, boxes, min_gap)]
    return sorted(idxs, key=lambda i: (boxes[i][1], boxes[i][0]))


def _split(idxs: list[int], boxes: Sequence[Box], axis: int, min_gap: float) -> list[list[int]]:
    lo, hi = axis, axis + 2
    # Layout boxes are loose: forgive small overlaps between neighbours by shrinking each box.
    def span(i: int) -> tuple[float, float]:
        a, b = boxes[i][lo], boxes[i][hi]
        shrink = min(min_gap, (b - a) / 4)
        return a + shrink, b - shrink

    ordered = sorted(idxs, key=lambda i: span(i)[0])
    groups: list[list[int]] = [[ordered[0]]]
    end = span(ordered[0])[1]
    for i in ordered[1:]:
        start, stop = span(i)
        if start - end >= min_gap:
            groups.append([i])
        else:
            groups[-1].append(i)
        end = max(end, stop)
    return groups
