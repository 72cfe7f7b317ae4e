"""Box arithmetic shared by the engines and the assembler."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Box = tuple[float, float, float, float]


def area(box: Box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def intersection(a: Box, b: Box) -> float:
    return area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def iou(a: Box, b: Box) -> float:
    inter = intersection(a, b)
    union = area(a) + area(b) - inter
    return inter / union if union > 0 else 0.0


def union_box(boxes: Iterable[Box]) -> Box:
    boxes = list(boxes)
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def quad_to_box(quad: Sequence[Sequence[float]]) -> Box:
    xs = [float(p[0]) for p in quad]
    ys = [float(p[1]) for p in quad]
    return (min(xs), min(ys), max(xs), max(ys))


def best_container(box: Box, candidates: Sequence[Box], min_share: float = 0.5) -> int | None:
    """Index of the candidate that holds the largest share of ``box``, if that share is enough."""
    own = area(box)
    if own <= 0:
        return None
    best, best_share = None, min_share
    for i, cand in enumerate(candidates):
        share = intersection(box, cand) / own
        if share >= best_share:
            best, best_share = i, share
    return best
