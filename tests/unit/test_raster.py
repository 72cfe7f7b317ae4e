"""Page images: the direction text runs in, and sideways scans turned back upright."""

from __future__ import annotations

import numpy as np
import pymupdf
from PIL import Image

from apps.jobs.documents import line_direction_score, straighten_sideways_scan
from tests.support.documents import dev_file


def test_line_direction_of_a_scan_and_of_it_turned():
    scan = np.asarray(Image.open(dev_file("phototest.tif")).convert("L").reduce(6))
    assert line_direction_score(scan) > 0.05
    assert line_direction_score(np.rot90(scan)) < -0.05
    assert line_direction_score(np.full((100, 100), 255, np.uint8)) == 0.0  # blank: no opinion


def test_quarter_turned_scan_is_straightened_and_upright_pages_are_left_alone():
    with pymupdf.open(dev_file("scanned_ocr_test_rotated_90.pdf")) as doc:
        page = doc[0]
        assert page.rotation == 270
        assert straighten_sideways_scan(page) is True
        assert page.rotation == 0 and page.rect.height > page.rect.width
    with pymupdf.open(dev_file("scanned_ocr_test.pdf")) as doc:
        assert straighten_sideways_scan(doc[0]) is False and doc[0].rotation == 0
    # A landscape page whose /Rotate is what makes its text upright keeps it.
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    for i in range(12):
        # Lines drawn bottom to top, side by side: the page's /Rotate 90 shows them left to right.
        page.insert_text((60 + 20 * i, 780), "a line of text that runs across the page " * 2, fontsize=9, rotate=90)
    page.set_rotation(90)
    assert straighten_sideways_scan(page) is False and page.rotation == 90
