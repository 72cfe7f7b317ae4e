"""The door's probe does bounded work in the web process whatever the file (issue 35): a PDF's
pages are measured from the page tree and never loaded, an image's scans and frames counted from
headers, and an image that decodes to far more pixels than its bytes justify refused.

The poison files are built here (``tests.hostile.corpus``). The PDF checks spy on MuPDF's page
loader (the real one runs; calls are counted) rather than timing the probe: speed lives in
``make bench`` (bench/tenancy.py measures the door's answer on the worst cases).
"""

from __future__ import annotations

import io

import pymupdf
import pytest

from apps.jobs import documents
from apps.jobs.documents import InputError, probe
from tests.hostile.corpus import animated_webp, many_frame_tiff, progressive_jpeg, shared_annots_pdf, text_pdf


def count_page_loads(monkeypatch) -> list[int]:
    """From here on, every page MuPDF loads is counted (the file is built before: building loads pages)."""
    loaded: list[int] = []
    real = pymupdf.Document.load_page

    def spy(self, *args, **kwargs):
        loaded.append(args[0] if args else kwargs.get("page_id", 0))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pymupdf.Document, "load_page", spy)
    return loaded


def _probe(data: bytes, **kw) -> documents.Probe:
    return probe(io.BytesIO(data), max_pages=kw.get("max_pages", 5000), max_pixels=60_000_000)


def test_a_pdf_is_probed_without_loading_a_page(monkeypatch):
    """The issue's file: 20 pages sharing one huge /Annots array (1.6M entries there; 200,000
    here proves the point). Loading each page read the whole array: minutes per POST."""
    data = shared_annots_pdf(pages=20, entries=200_000)
    pages_loaded = count_page_loads(monkeypatch)
    found = _probe(data)
    assert (found.kind, found.page_count) == ("pdf", 20)
    assert pages_loaded == []


def test_page_boxes_are_still_checked_from_the_page_tree(monkeypatch):
    data = text_pdf(size=(15_000, 15_000))
    pages_loaded = count_page_loads(monkeypatch)
    with pytest.raises(InputError) as refused:
        _probe(data)
    assert refused.value.code == "input:image-too-large"
    assert pages_loaded == []


def test_a_jpeg_with_thousands_of_scans_is_refused_at_the_door():
    data = progressive_jpeg(side=500, scans=2000)
    assert documents.jpeg_scans(data) == 2000 and len(data) < 64 * 1024
    with pytest.raises(InputError) as refused:
        _probe(data)
    assert refused.value.code == "input:too-complex"
    assert _probe(progressive_jpeg(side=500, scans=10)).page_count == 1  # an ordinary progressive JPEG


def test_an_animation_on_a_huge_canvas_is_refused_by_what_it_decodes_to():
    """1,500 one-pixel frames on a 4000x4000 canvas: each frame is drawn on the whole canvas."""
    data = animated_webp((4000, 4000), 1500)
    with pytest.raises(InputError) as refused:
        _probe(data)
    assert refused.value.code == "input:too-large"
    assert "decode to 24000000000 pixels" in refused.value.message


def test_a_many_page_tiff_of_ordinary_pages_is_accepted():
    assert _probe(many_frame_tiff(frames=300, side=64)).page_count == 300
