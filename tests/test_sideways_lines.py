"""Lines set sideways on an upright page (a margin stamp, rotated column headers), read the way
they run, decided by reading: the default (``fast``) profile, real models, real pages, no mocks.

rapidocr cuts every line taller than wide turned a quarter counter-clockwise, so text running
bottom to top (an arXiv stamp, most rotated table headers) reached the recogniser upside down: on
the code before ``_read_sideways`` agstat's headers read "uondunsuo leno1", "(sauuo] ym7 up)",
"Proed ption", and a bottom-to-top stamp "arx7  2 [  :023"."""

from __future__ import annotations

import numpy as np
import pymupdf
import pytest

from tests.support.documents import BUNDLED_DATA
from workers.engines.cpu import RapidOcrRecognizer, profile_config

CORPUS = BUNDLED_DATA.parent.parent / "bench" / "corpus" / "files"
STAMP = "arXiv:1706.03762v7 [cs.CL] 2 Aug 2023"


@pytest.fixture(scope="module")
def fast(tmp_path_factory):
    return RapidOcrRecognizer(profile_config("fast", threads=1, model_cache_dir=str(tmp_path_factory.mktemp("m"))))


def _render(page: pymupdf.Page) -> np.ndarray:
    pix = page.get_pixmap(dpi=200, colorspace=pymupdf.csRGB, alpha=False)
    return np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.width, 3).copy()


def _squeezed(text: str) -> str:
    return "".join(text.split())


@pytest.mark.slow  # a table page read at four turns: 2-2.5 s
def test_rotated_table_headers_read_the_way_they_run(fast):
    """camelot's agstat.pdf (bench/corpus): a table whose column headers run bottom to top."""
    with pymupdf.open(CORPUS / "camelot" / "agstat.pdf") as doc:
        read = fast.read_page(_render(doc[0]))
    texts = {line.text for line in read.lines}
    for header in ("Projected Population", "Total Consumption", "Total Requirement", "Equivalent", "Kharif"):
        assert header in texts, (header, sorted(texts)[:40])


@pytest.mark.parametrize("turn", [90, 270])
def test_a_margin_stamp_reads_either_way_it_runs(fast, turn):
    doc = pymupdf.open()
    page = doc.new_page(width=420, height=595)
    page.insert_text((50, 60), "Attention Is All You Need", fontsize=14)
    for i in range(12):
        page.insert_text((50, 90 + i * 13), "Sequence transduction models are based on recurrent", fontsize=9)
    # rotate=90 runs bottom to top (arXiv's stamp), 270 top to bottom.
    page.insert_text((24, 520) if turn == 90 else (400, 80), STAMP, fontsize=14, rotate=turn, color=(0.5, 0.5, 0.5))
    read = fast.read_page(_render(page))
    stamps = [line for line in read.lines if "arXiv" in line.text]
    assert len(stamps) == 1, [line.text for line in read.lines]
    assert _squeezed(stamps[0].text) == _squeezed(STAMP)
    x0, y0, x1, y1 = stamps[0].bbox
    assert y1 - y0 > 5 * (x1 - x0), "the box is the stamp's, on the page as it stands"
