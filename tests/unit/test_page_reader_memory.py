"""Ingest's page reader (workers/budget.py) on a scanned PDF: its child's memory does not grow
with the pages read.

Each page of the PDF carries its own full-page scan (A4 at 300 dpi, a distinct image per page,
as a real scan has). MuPDF keeps decoded images in its store, up to 256 MB; emptied only every
PDF_STORE_EVERY pages, a scanned PDF of 30 pages or more took the child from 239 MiB (3 pages)
to 427 MiB. The peak resident size of the child (VmHWM) is read while it runs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psutil
import pymupdf
import pytest
from PIL import Image, ImageDraw

from workers import budget
from workers.engines import textlayer

# A decoded A4 scan at 300 dpi is ~8.7 MB (grey) and the rendered page 11.6 MB (RGB, 200 dpi):
# a store kept for 14 pages holds well over 100 MB more than one emptied after each page.
SLACK_MIB = 40


def _scanned_pdf(path: Path, pages: int) -> Path:
    doc = pymupdf.open()
    rng = np.random.default_rng(7)
    for n in range(pages):
        img = Image.new("L", (2480, 3508), 255)
        draw = ImageDraw.Draw(img)
        for y in range(300, 3200, 90):  # lines of "text": dark bars of random lengths
            draw.rectangle((250, y, 250 + int(rng.integers(800, 2000)), y + 28), fill=30)
        draw.text((250, 150), f"page {n + 1}", fill=0)  # every page's image differs
        out = path.with_suffix(f".{n}.png")
        img.save(out, optimize=False, compress_level=1)
        page = doc.new_page(width=595, height=842)
        page.insert_image(page.rect, filename=str(out))
    doc.save(path)
    doc.close()
    return path


def _child_peak_mib(pdf: Path, pages: int) -> float:
    request = budget.PageRequest(
        dpi=200, max_pixels=60_000_000, min_chars=50, force_ocr=False, text_layer=textlayer.TextLayerConfig()
    )
    peak = 0.0
    for found in budget.read_pdf_pages(str(pdf), list(range(pages)), request, budget.PageBudget()):
        assert isinstance(found, budget.ImagePage)
        for child in psutil.Process().children():
            try:
                status = Path(f"/proc/{child.pid}/status").read_text()
            except OSError:
                continue  # it ended after its last page
            # A child that has exited (a zombie until reaped) has no VmHWM line any more.
            kib = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)
            peak = max(peak, kib / 1024)
    return peak


@pytest.mark.slow  # a scanned PDF read page by page in a child, its peak sampled: ~2 s
def test_reading_a_scanned_pdf_does_not_grow_with_its_pages(tmp_path):
    pdf = _scanned_pdf(tmp_path / "scan.pdf", 16)
    few = _child_peak_mib(pdf, 2)
    many = _child_peak_mib(pdf, 16)
    assert many - few < SLACK_MIB, f"child peak {few:.0f} MiB for 2 pages, {many:.0f} MiB for 16"
