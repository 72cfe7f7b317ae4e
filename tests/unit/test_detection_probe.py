"""The two-pass detection's test of a probe result: single lines big enough to read, not merged blocks."""

from __future__ import annotations

import numpy as np

from workers.engines.cpu.detection import probe_is_lines


def test_lines_of_normal_print_keep_the_probe():
    # multi_page.pdf p3 at 960 px with the tiny detector: body lines 16-20 px.
    assert probe_is_lines(np.array([16.0, 16.2, 17.4, 17.5, 18.9, 19.8, 20.1] * 5), 13.0)


def test_a_heading_or_two_among_body_lines_keeps_the_probe():
    assert probe_is_lines(np.array([17.0] * 20 + [36.0, 40.0]), 13.0)


def test_small_print_is_detected_again():
    assert not probe_is_lines(np.array([9.0, 10.0, 11.0, 12.0]), 13.0)
    assert not probe_is_lines(np.array([]), 13.0)


def test_lines_merged_into_blocks_are_detected_again():
    # The shrunk phototest on a large sheet, tiny detector at 960 px: the median passes (14.4 px),
    # but two boxes are paragraphs 35 and 64 px tall.
    assert not probe_is_lines(np.array([35.3, 13.0, 64.3, 13.0, 8.2, 15.8]), 13.0)


def test_a_blank_scan_is_blank_and_a_page_number_alone_is_not():
    from workers.engines.cpu.detection import FULL_PASS_MIN_INK, ink_share, is_blank

    rng = np.random.default_rng(0)
    # A 200-dpi A4 scan of an empty sheet: paper grey with sensor noise, no ink.
    page = np.clip(rng.normal(235, 6, (2339, 1654)), 0, 255).astype(np.uint8)
    assert is_blank(page) and is_blank(np.stack([page] * 3, axis=-1))
    # A page number alone (a 10-pt "3": about 16 x 24 px of strokes) is read.
    page[2200:2224, 820:824] = 20
    page[2200:2204, 812:824] = 20
    page[2220:2224, 812:824] = 20
    page[2210:2214, 814:824] = 20
    assert not is_blank(page)
    # ... but it is far from the ink of a page of small print, so a probe that finds nothing on it
    # does not send it to the full-size pass.
    assert ink_share(page) < FULL_PASS_MIN_INK
    # Light print on a dark page is ink too.
    dark = np.full((400, 400), 30, np.uint8)
    dark[100:300:4, 50:350] = 230
    assert not is_blank(dark) and ink_share(dark) > FULL_PASS_MIN_INK


def test_the_detector_input_is_rapidocrs_normalisation_in_float32():
    # Our tensor is built channel by channel in float32 (no page-sized float64 or transposed copy);
    # it must still be the input rapidocr's own DetPreProcess would give the detector, or every
    # box moves. Odd sizes and a non-default mean/std catch a plane or channel written to the wrong place.
    from rapidocr.ch_ppocr_det.utils import DetPreProcess

    from workers.engines.cpu.detection import _normalised

    rng = np.random.default_rng(1)
    page = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    pre = DetPreProcess(736, "min", mean, std)
    expected = pre.permute(pre.normalize(page))[None].astype(np.float32)
    got = _normalised(page, pre.mean, pre.std)
    assert got.shape == (1, 3, 37, 53) and got.dtype == np.float32 and got.flags["C_CONTIGUOUS"]
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
