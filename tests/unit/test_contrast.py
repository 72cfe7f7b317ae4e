"""Line crops stretched to full contrast only when their print is faint (``rapid.with_contrast``)."""

from __future__ import annotations

import numpy as np

from workers.engines.cpu.rapid import FAINT_SPAN, with_contrast


def _line(ink: int, paper: int = 255) -> np.ndarray:
    crop = np.full((40, 200, 3), paper, np.uint8)
    crop[10:30, 20:180:6] = ink  # strokes
    return crop


def test_faint_ink_becomes_black_on_white():
    out = with_contrast(_line(ink=170))
    assert out.min() == 0 and out.max() == 255
    assert (out[10:30, 20:180:6] == 0).all(), "the strokes are black"


def test_dark_print_is_left_as_it_is():
    crop = _line(ink=255 - FAINT_SPAN - 20)
    assert with_contrast(crop) is crop


def test_a_crop_with_no_print_is_not_amplified():
    crop = np.full((40, 200, 3), 250, np.uint8)
    crop[5, 5] = 245
    assert with_contrast(crop) is crop


def test_coloured_ink_counts_as_ink():
    crop = _line(ink=255)
    crop[10:30, 20:180:6] = (255, 120, 255)  # faint magenta: dark in one channel only
    out = with_contrast(crop)
    assert out[15, 20, 1] == 0
