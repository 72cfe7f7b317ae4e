"""Page images between stages (``encode_png`` / ``decode_png``) and the engines' channel flip.

A page is stored once by ingest and decoded by every stage after it, so these run on every page:
each must give back exactly the pixels it was given, and a stored object that is not what ingest
wrote must fail as a bad image without costing more than a page's memory.
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from apps.jobs.documents import decode_png, encode_png
from workers.engines.cpu.detection import ink_share
from workers.engines.cpu.rapid import as_bgr

LIMIT = 60_000_000


def _page(colour: bool) -> np.ndarray:
    rng = np.random.default_rng(7)
    grey = np.full((300, 200), 250, np.uint8)
    grey[40:260:9, 20:180] = rng.integers(0, 90, (25, 160), dtype=np.uint8)  # lines of print
    page = np.stack([grey] * 3, axis=-1)
    if colour:
        page[100:120, 30:90] = (200, 20, 20)  # a red stamp
    return page


@pytest.mark.parametrize("colour", [False, True])
def test_a_page_comes_back_pixel_for_pixel(colour):
    page = _page(colour)
    back = decode_png(encode_png(page), LIMIT)
    assert back.shape == page.shape and back.dtype == np.uint8
    assert np.array_equal(back, page), "RGB order and every pixel kept"


def test_a_grey_page_is_stored_with_one_channel():
    with Image.open(io.BytesIO(encode_png(_page(colour=False)))) as img:
        assert img.mode == "L"
    with Image.open(io.BytesIO(encode_png(_page(colour=True)))) as img:
        assert img.mode == "RGB"


def test_a_planted_header_is_refused_before_decoding():
    """A PNG whose header claims 100,000 x 100,000 pixels (30 GB decoded) is refused from its
    first 24 bytes."""
    data = bytearray(encode_png(_page(colour=False)))
    data[16:24] = (100_000).to_bytes(4, "big") * 2
    with pytest.raises(ValueError, match="more than a stored page"):
        decode_png(bytes(data), LIMIT)


@pytest.mark.parametrize("data", [b"", b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, b"GIF89a" + b"\x00" * 40])
def test_bytes_that_are_not_a_stored_page_are_a_value_error(data):
    with pytest.raises(ValueError):
        decode_png(data, LIMIT)


def test_a_cut_off_page_is_a_value_error():
    data = encode_png(_page(colour=True))
    with pytest.raises(ValueError):
        decode_png(data[: len(data) // 2], LIMIT)


def test_as_bgr_flips_colour_and_passes_grey_as_it_is():
    colour = _page(colour=True)
    flipped = as_bgr(colour)
    assert tuple(flipped[110, 50]) == (20, 20, 200)
    assert flipped.flags.c_contiguous
    grey = _page(colour=False)
    assert as_bgr(grey) is grey  # red and blue agree: nothing to flip, nothing copied


def test_ink_share_reads_the_darkest_channel():
    page = np.full((400, 400, 3), 255, np.uint8)
    page[0:40, :, 2] = 0  # ink only in blue: yellow print on white still counts
    assert ink_share(page) == pytest.approx(0.1, abs=0.01)
    assert ink_share(page[..., 0]) == 0.0
