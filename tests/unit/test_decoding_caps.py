"""The pixel caps behind the probe, checked on the functions the worker calls (defence in depth:
these hold even for a file that somehow passed the probe)."""

from __future__ import annotations

import io

import pymupdf
import pytest
from django.conf import settings
from PIL import Image

from apps.jobs.documents import InputError, load_image_frame, render_pdf_page
from tests.hostile.corpus import text_pdf, tiff_with_huge_second_frame


def test_pillow_bomb_guard_is_set_from_settings():
    # ApiConfig.ready runs in every process that loads Django: web, workers, the CLI.
    assert Image.MAX_IMAGE_PIXELS == settings.OCR_MAX_IMAGE_PIXELS


def test_big_page_renders_under_the_pixel_cap():
    page = pymupdf.open(stream=text_pdf(size=(5000, 5000)), filetype="pdf")[0]
    image, dpi = render_pdf_page(page, 200, max_pixels=8_000_000)
    assert image.shape[0] * image.shape[1] <= 8_000_000
    assert 36 <= dpi < 200


def test_page_too_big_even_at_the_dpi_floor_is_refused():
    page = pymupdf.open(stream=text_pdf(size=(14_000, 14_000)), filetype="pdf")[0]
    with pytest.raises(InputError) as refused:
        render_pdf_page(page, 200, max_pixels=1_000_000)  # 36 dpi would still be 49 M pixels
    assert refused.value.code == "input:image-too-large"


def test_decoding_a_huge_later_frame_is_refused_not_attempted():
    data = tiff_with_huge_second_frame()
    image, _ = load_image_frame(data, 0, max_pixels=60_000_000)
    assert image.shape[:2] == (40, 40)
    with pytest.raises(InputError) as refused:
        load_image_frame(data, 1, max_pixels=60_000_000)
    assert refused.value.code == "input:image-too-large"


def test_truncated_image_fails_decoding_with_a_code():
    buf = io.BytesIO()
    Image.new("RGB", (300, 300), "white").save(buf, "JPEG")
    with pytest.raises(InputError) as refused:
        load_image_frame(buf.getvalue()[:400], 0, max_pixels=60_000_000)
    assert refused.value.code == "input:corrupt"
