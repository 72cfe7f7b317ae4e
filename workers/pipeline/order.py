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
    """Boxes that no gap separates: rows top to bottom, each left to right. Boxes share a row
    when they overlap vertically by half the shorter one's height, so a box that starts a few
    pixels lower than its left neighbour is still read after it."""
    rows: list[list[int]] = []
    for i in sorted(idxs, key=lambda i: (boxes[i][1] + boxes[i][3]) / 2):
        y0, y1 = boxes[i][1], boxes[i][3]
        if rows:
            last = rows[-1]
            ry0, ry1 = min(boxes[j][1] for j in last), max(boxes[j][3] for j in last)
            overlap = min(y1, ry1) - max(y0, ry0)
            if overlap >= 0.5 * min(y1 - y0, ry1 - ry0):
                last.append(i)
                continue
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
