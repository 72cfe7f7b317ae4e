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
