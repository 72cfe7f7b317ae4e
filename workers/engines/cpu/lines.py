"""From recognised text lines to region texts: each line goes to the layout region holding most
of it; lines outside every region come back as extra regions, never dropped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from workers.content import tables
from workers.engines.base import LayoutBox, Recognition, RegionText, TextLine
from workers.engines.geometry import best_container, union_box


def table_text(text: RegionText) -> RegionText:
    """A table region's OCR lines as a grid: Markdown (HTML when cells span) and the cells.
    Lines that form no grid stay as they were read."""
    words = [tables.Word(*line.bbox, line.text) for line in text.lines]
    # OCR lines are whole phrases, so a narrow gap already separates columns.
    grid = tables.grid_from_words(words, min_gap=0.15)
    if grid is None:
        return text
    return replace(text, text=tables.region_text(grid), table=tables.to_dict(grid))


_NOT_TEXT_HOLDERS = frozenset({"figure"})


def assign_lines(lines: Sequence[TextLine], regions: Sequence[LayoutBox]) -> Recognition:
    """Give each line to the region that holds most of it; group the rest into new regions.

    Figures are not text containers: a line over a figure goes to a text region if one holds it,
    else it becomes part of an extra region, so words printed inside a chart are kept.
    """
    # The Markdown shows a figure as a placeholder, so text given to a figure would be lost there.
    holders = [i for i, r in enumerate(regions) if r.label not in _NOT_TEXT_HOLDERS]
    boxes = [regions[i].bbox for i in holders]
    buckets: list[list[TextLine]] = [[] for _ in regions]
    orphans: list[TextLine] = []
    for line in lines:
        k = best_container(line.bbox, boxes)
        if k is None:
            orphans.append(line)
        else:
            buckets[holders[k]].append(line)
    texts = [_join(bucket) for bucket in buckets]
    extra = [
        (LayoutBox(label="text", bbox=union_box(l.bbox for l in group), score=0.0), _join(group, ("outside-layout",)))
        for group in _group_lines(orphans)
    ]
    return Recognition(texts=texts, extra=extra)


def _join(lines: Sequence[TextLine], flags: tuple[str, ...] = ()) -> RegionText:
    if not lines:
        return RegionText(text="", confidence=None, flags=flags)
    ordered = sort_lines(lines)
    text = "\n".join(" ".join(l.text for l in row) for row in ordered)
    flat = [l for row in ordered for l in row]
    weights = [max(1, len(l.text)) for l in flat]
    conf = sum(l.confidence * w for l, w in zip(flat, weights, strict=True)) / sum(weights)
    return RegionText(text=text, confidence=round(conf, 4), lines=tuple(flat), flags=flags)


def sort_lines(lines: Sequence[TextLine]) -> list[list[TextLine]]:
    """Rows of lines, top to bottom; lines whose vertical centres fall within half a line height
    of each other share a row and are read left to right."""
    rows: list[list[TextLine]] = []
    for line in sorted(lines, key=lambda l: (l.bbox[1] + l.bbox[3]) / 2):
        cy = (line.bbox[1] + line.bbox[3]) / 2
        h = max(1.0, line.bbox[3] - line.bbox[1])
        if rows:
            last = rows[-1]
            lcy = sum((l.bbox[1] + l.bbox[3]) / 2 for l in last) / len(last)
            if abs(cy - lcy) < h / 2:
                last.append(line)
                continue
        rows.append([line])
    return [sorted(row, key=lambda l: l.bbox[0]) for row in rows]


def _group_lines(lines: Sequence[TextLine]) -> list[list[TextLine]]:
    """Cluster stray lines into blocks: vertically close and horizontally overlapping."""
    groups: list[list[TextLine]] = []
    for line in sorted(lines, key=lambda l: (l.bbox[1], l.bbox[0])):
        h = max(1.0, line.bbox[3] - line.bbox[1])
        for group in groups:
            gx0, _gy0, gx1, gy1 = union_box(l.bbox for l in group)
            if line.bbox[1] - gy1 < 1.5 * h and min(gx1, line.bbox[2]) > max(gx0, line.bbox[0]):
                group.append(line)
                break
        else:
            groups.append([line])
    return groups
