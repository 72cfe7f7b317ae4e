"""What the rapid* libraries need from us: BGR pixels, line crops at the contrast their
recogniser expects, and their INFO logs kept quiet."""

from __future__ import annotations

import contextlib
import logging

import numpy as np


@contextlib.contextmanager
def info_held_back():
    previous = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(previous)


def quiet(prefix: str) -> None:
    """rapid* give each module its own INFO logger; only their warnings belong in our logs."""
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(prefix):
            logging.getLogger(name).setLevel(logging.WARNING)


def as_bgr(image: np.ndarray) -> np.ndarray:
    """Our page images are RGB; rapid* read ndarrays as OpenCV BGR, so flip the channels. A grey
    page's red and blue are the same and it is passed as it is: the check is ~3 ms on a 200-dpi
    page, the copy ~20 ms, and most scans are grey."""
    if image.ndim == 2:
        return np.stack([image] * 3, axis=-1)
    if image.flags.c_contiguous and np.array_equal(image[:, :, 0], image[:, :, 2]):
        return image
    return np.ascontiguousarray(image[:, :, 2::-1])


# A line crop whose ink spans less of the grey range than this is faint print (a tired ribbon, a
# light photocopy, fading thermal paper): the recognisers were trained on dark print, and read
# it stretched to full contrast (docs/benchmarks.md, "Faint print"). Black print spans ~200-255.
FAINT_SPAN = 160
# ... but a crop spanning under this is no print at all (a smudge, an empty box): left as it is.
FLAT_SPAN = 10


def with_contrast(crop: np.ndarray) -> np.ndarray:
    """``crop`` (a line of print) stretched so its ink is black and its paper white, when the
    print is faint; otherwise ``crop`` itself."""
    import cv2

    sample = crop[::2, ::2]
    darkest = sample.min(axis=2) if sample.ndim == 3 else sample  # coloured ink counts as ink
    # The 2nd and 98th percentiles from a histogram: np.percentile sorts, ~0.75 ms a crop.
    cumulative = np.cumsum(np.bincount(darkest.ravel(), minlength=256))
    low, high = np.searchsorted(cumulative, (0.02 * cumulative[-1], 0.98 * cumulative[-1]))
    span = int(high) - int(low)
    if span >= FAINT_SPAN or span <= FLAT_SPAN:
        return crop
    table = np.clip((np.arange(256, dtype=np.float32) - low) * (255.0 / span), 0, 255).astype(np.uint8)
    return cv2.LUT(crop, table)
