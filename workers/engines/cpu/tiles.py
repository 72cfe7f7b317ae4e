"""Large pages read in bands at the scale their print needs, not shrunk to the detector's limit.

A page is first scaled to fit ``det_max_side`` (2,000 px) for detection, as every page is. On a
poster, an A3 spread or a flatbed scan of a small receipt that shrink can leave print a few pixels
tall, which no recogniser reads (docs/benchmarks.md, "Script and scale"). When the
lines found on the shrunk page say the print is too small there (``needs_bands``), the page is read
again in horizontal bands, full width, at the scale that gives its lines about ``line_px`` pixels
(never enlarged): each band is cut from the page and scaled on its own, so no more than one band's
pixels are held at that scale at once (memory stays bounded by the shrunk page's size, not by
the page's). Bands overlap by several line heights, so every line lies whole inside some band; a
line is kept from the one band whose core (the band less half of each overlap) holds its centre,
and a box touching a band's cut edge is never kept (its whole twin lies in the neighbour).
Bands span the full width because text lines run across the page: cutting columns would cut lines.
Only the part of the page where the shrunk page showed print (and a margin around it) is banded
(``content_box``): a small receipt on a flatbed scan is not read as a whole sheet of blank bands.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The fewest pixels between bands' edges: more than a tall line, so no line is cut in both bands.
MIN_OVERLAP_PX = 128
# A box within this many pixels of a band's cut edge may be cut by it.
EDGE_PX = 2.0
# Around what the shrunk page showed, this share of the page's long side is read too.
CONTENT_MARGIN = 0.05


@dataclass(frozen=True)
class Band:
    """Rows ``top``-``bottom`` of the page scaled by ``scale`` (band pixels), and the rows of that
    scaled page whose lines this band keeps (``core_top``-``core_bottom``)."""

    top: int
    bottom: int
    core_top: float
    core_bottom: float


def needs_bands(
    heights: np.ndarray, shrink: float, max_shrink: float, min_line_px: float, merged_factor: float, merged_max: float
) -> bool:
    """Whether a page detected after a ``shrink`` to under ``max_shrink`` of its size must be read in
    bands: nothing was found, its median line is under ``min_line_px`` there, or its boxes are
    merged blocks of small print (more than ``merged_max`` of them taller than ``merged_factor``
    times the lower quartile). A milder shrink is kept: bands could not gain much resolution."""
    if shrink >= max_shrink or min_line_px <= 0:
        return False
    if not len(heights) or float(np.median(heights)) < min_line_px:
        return True
    merged = heights > merged_factor * float(np.percentile(heights, 25))
    return float(np.mean(merged)) > merged_max


def band_scale(heights: np.ndarray, shrink: float, line_px: float) -> float:
    """The scale (of the page as submitted) that gives the median line ``line_px`` pixels, never
    above 1; 1 when no line was found on the shrunk page."""
    if not len(heights):
        return 1.0
    native = float(np.median(heights)) / shrink
    return min(1.0, line_px / max(native, 1.0))


def plan(height: int, width: int, budget_px: int, line_px: float, min_rows: int = 0) -> list[Band]:
    """Bands over a page ``height`` x ``width`` (already at the band scale): each of about
    ``budget_px`` pixels (the shrunk page's, so no band costs the detector more memory than the
    shrunk page did) and at least ``min_rows`` tall (the detector enlarges a shorter input to its
    ``det_limit_side``: a band as tall costs the same and covers more), overlapping by
    ``MIN_OVERLAP_PX`` or four lines, whichever is more."""
    overlap = int(max(MIN_OVERLAP_PX, 4 * line_px))
    band_h = max(int(budget_px / max(width, 1)), 3 * overlap, min_rows)
    if band_h >= height:
        return [Band(0, height, 0.0, float(height))]
    step = band_h - overlap
    tops = list(range(0, height - band_h, step)) + [height - band_h]
    bands = []
    for k, top in enumerate(tops):
        bottom = top + band_h
        core_top = 0.0 if k == 0 else (top + tops[k - 1] + band_h) / 2
        core_bottom = float(height) if k == len(tops) - 1 else (tops[k + 1] + bottom) / 2
        bands.append(Band(top, bottom, core_top, core_bottom))
    return bands


def kept(quads: np.ndarray, band: Band, page_height: int) -> np.ndarray:
    """Which of a band's line quads (band pixels) the band keeps: whole inside it (clear of a cut
    edge) and centred in its core."""
    if not len(quads):
        return np.zeros(0, dtype=bool)
    ys = quads[:, :, 1]
    top_cut = band.top > 0
    bottom_cut = band.bottom < page_height
    clear = np.ones(len(quads), dtype=bool)
    if top_cut:
        clear &= ys.min(axis=1) > EDGE_PX
    if bottom_cut:
        clear &= ys.max(axis=1) < (band.bottom - band.top) - EDGE_PX
    centre = ys.mean(axis=1) + band.top
    return clear & (centre >= band.core_top) & (centre < band.core_bottom)


def content_box(
    quads: np.ndarray, height: int, width: int, margin: float = CONTENT_MARGIN
) -> tuple[int, int, int, int]:
    """The part of a page worth reading in bands: the boxes found on the shrunk page (page pixels)
    and ``margin`` of the page's long side around them (print too small to be found there sits
    beside print that was: a receipt on a flatbed scan is found, its fine print with it); the
    whole page when nothing was found."""
    if not len(quads):
        return 0, 0, width, height
    pad = margin * max(height, width)
    xs, ys = quads[:, :, 0], quads[:, :, 1]
    return (
        max(0, int(xs.min() - pad)),
        max(0, int(ys.min() - pad)),
        min(width, int(np.ceil(xs.max() + pad))),
        min(height, int(np.ceil(ys.max() + pad))),
    )
