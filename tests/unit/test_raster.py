"""Scan orientation: the quarter-turn a scanned page stands at, found from its ink, on real scans
turned every way, and pages that do not say (a map, one line of text) left as they are."""

from __future__ import annotations

import numpy as np
import pymupdf
import pytest
from PIL import Image

from apps.jobs.documents import detect_orientation, render_pdf_page, turn_upright, upright_scan
from tests.support.documents import BUNDLED_DATA, dev_file

SCANS = ["phototest.tif", "eurotext.tif", "scanned_ocr_test.pdf"]


def _image(name: str) -> tuple[np.ndarray, int]:
    path = dev_file(name)
    if path.suffix == ".pdf":
        with pymupdf.open(path) as doc:
            return render_pdf_page(doc[0], 150, 10**9)
    return np.asarray(Image.open(path).convert("RGB")), 300


def _turned(image: np.ndarray, rotation: int) -> np.ndarray:
    """The image with its content turned ``rotation`` degrees clockwise."""
    return np.ascontiguousarray(np.rot90(image, -rotation // 90))


@pytest.mark.parametrize("name", SCANS)
@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
def test_scan_turned_every_way_is_found_and_turned_back(name, rotation):
    image, dpi = _image(name)
    found = detect_orientation(_turned(image, rotation), dpi)
    assert found.rotation == rotation, found
    upright, turn = upright_scan(_turned(image, rotation), dpi)
    assert turn == rotation and np.array_equal(upright, image)


def test_batch_scanner_pages_at_four_orientations():
    """OCRmyPDF's cardinal.pdf: one scan baked in at 0, 90, 180 and 270 degrees, one a page."""
    with pymupdf.open(BUNDLED_DATA / "cardinal.pdf") as doc:
        found = [detect_orientation(*render_pdf_page(page, 100, 10**9)).rotation for page in doc]
    assert found == [0, 90, 180, 270]


def test_page_stored_with_rotate_is_read_as_displayed():
    """scanned_ocr_test_rotated_90.pdf stores the upright scan with /Rotate 270: displayed, its
    text runs up the page, and the turn found is the one that displays it so."""
    with pymupdf.open(dev_file("scanned_ocr_test_rotated_90.pdf")) as doc:
        image, dpi = render_pdf_page(doc[0], 100, 10**9)
    assert detect_orientation(image, dpi).rotation == 270
    assert turn_upright(image, 270).shape[0] > turn_upright(image, 270).shape[1]  # portrait again


def test_pages_that_do_not_say_are_left_alone():
    """A blank page, and a single line of text (whose word gaps look like the gaps between the
    lines of a sideways page), keep their orientation."""
    assert detect_orientation(np.full((400, 300, 3), 255, np.uint8), 100).rotation == 0
    doc = pymupdf.open()
    page = doc.new_page(width=400, height=40)
    page.insert_text((10, 25), "Crefele is a perfectly crummy word, said the typesetter.", fontsize=12)
    image, dpi = render_pdf_page(page, 200, 10**9)
    assert detect_orientation(image, dpi).rotation == 0
