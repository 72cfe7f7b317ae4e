"""Reading order by recursive XY-cut.

Columns are cut first: a vertical gap that runs the full height of a block splits it into
columns read left to right, so the lines of a two-column page never interleave. Where no column
gap exists, horizontal gaps split the block into bands read top to bottom, and consecutive bands
that share a column gap are read as one block (its columns then cut as above).
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
    columns = _split(idxs, boxes, 0, min_gap)
    if len(columns) > 1:
        return [i for g in columns for i in _cut(g, boxes, min_gap)]
    bands = _split(idxs, boxes, 1, min_gap)
    if len(bands) > 1:
        # Never a single group: if all bands shared a column gap, the column cut above had won.
        return [i for g in _merge_column_bands(bands, boxes, min_gap) for i in _cut(g, boxes, min_gap)]
    return _rows_then_columns(idxs, boxes)


def _rows_then_columns(idxs: list[int], boxes: Sequence[Box]) -> list[int]:
    """Boxes that no gap separates: rows top to bottom, each left to right.

    Boxes side by side (overlapping vertically by half the shorter one's height, horizontally by
    less than half the narrower one's width) share a row, so a box that starts a few pixels lower
    than its left neighbour is still read after it; loose boxes stacked on each other are read
    top to bottom.
    """

    def side_by_side(a: int, b: int) -> bool:
        (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = boxes[a][:4], boxes[b][:4]
        v = min(ay1, by1) - max(ay0, by0)
        h = min(ax1, bx1) - max(ax0, bx0)
        return v >= 0.5 * min(ay1 - ay0, by1 - by0) and h < 0.5 * min(ax1 - ax0, bx1 - bx0)

    rows: list[list[int]] = []
    for i in sorted(idxs, key=lambda i: (boxes[i][1], boxes[i][0])):
        if rows and all(side_by_side(i, j) for j in rows[-1]):
            rows[-1].append(i)
        else:
            rows.append([i])
    return [i for row in rows for i in sorted(row, key=lambda i: boxes[i][0])]


def _merge_column_bands(bands: list[list[int]], boxes: Sequence[Box], min_gap: float) -> list[list[int]]:
    """Join consecutive bands that share a column gap.

    Below a full-width title, paragraphs of two columns often line up row by row, so every row
    is its own horizontal band; cut band by band, the page would be read left, right, left,
    right. A band joins the one above while the two together still have a vertical gap running
    through them; a full-width block (a title, a wide table) has none and starts a new group.
    """
    groups = [bands[0]]
    for band in bands[1:]:
        joined = groups[-1] + band
        if len(_split(joined, boxes, 0, min_gap)) > 1:
            groups[-1] = joined
        else:
            groups.append(band)
    return groups


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
