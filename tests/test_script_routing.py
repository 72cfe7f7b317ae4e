"""Script and scale decided by what the page reads, on the default (``fast``) profile: real models
from the installed wheels on real pages (tests/data/script: see its README), no mocks.

On the code before these checks the fast profile read the Japanese page 0.03 and the Chinese
page 0.62 character F1 (Latin lookalike symbols, no flag), the Korean page 0.09 as symbols
marked done, and the flatbed-sized sheet 0.95 (print shrunk to ~10 px)."""

from __future__ import annotations

import numpy as np
import pymupdf
import pytest
from PIL import Image

from bench.accuracy import char_scores
from tests.support.documents import BUNDLED_DATA
from workers.engines.base import LayoutBox
from workers.engines.cpu import RapidOcrRecognizer, profile_config
from workers.engines.cpu.recognizer import FULL_BANDS
from workers.engines.cpu.script import (
    FLAG_SCRIPT_UNSUPPORTED,
    MISREAD_SHARE,
    SAMPLE_FIRST,
    SCRIPT_CJK,
    SCRIPT_LATIN,
    SCRIPT_UNSUPPORTED,
)
from workers.engines.cpu.script import misread_share as script_misread_share

SCRIPT_DATA = BUNDLED_DATA / "script"


def _render(page: pymupdf.Page, dpi: int = 200) -> np.ndarray:
    pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csRGB, alpha=False)
    return np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.width, 3).copy()


def _page(name: str) -> tuple[np.ndarray, str]:
    with pymupdf.open(SCRIPT_DATA / name) as doc:
        return _render(doc[0]), doc[0].get_text()


@pytest.fixture(scope="module")
def fast(tmp_path_factory):
    return RapidOcrRecognizer(profile_config("fast", threads=1, model_cache_dir=str(tmp_path_factory.mktemp("m"))))


@pytest.fixture(scope="module")
def without_other_scripts(tmp_path_factory):
    """The fast profile where no model for the other scripts is installed (OCR_OTHER_SCRIPTS=false
    stands for a machine without Tesseract's models): what such a page gets is its flag.
    tests/test_other_scripts.py reads the same pages with the models."""
    return RapidOcrRecognizer(
        profile_config("fast", threads=1, other_scripts=False, model_cache_dir=str(tmp_path_factory.mktemp("m")))
    )


def _text(read) -> str:
    return "\n".join(line.text for line in read.lines)


def test_a_latin_page_is_latin_and_never_loads_the_full_head(fast, tmp_path):
    with Image.open(BUNDLED_DATA / "phototest.tif") as img:
        image = np.asarray(img.convert("RGB"))
    read = fast.read_page(image)
    assert (read.script, read.flags) == (SCRIPT_LATIN, ())
    assert "quick brown dog" in _text(read)
    assert fast._full_head is None, "a worker that sees only confident Latin pages starts and runs as before"
    # A re-reader that is the full head is the one the check uses: nothing more is loaded.
    full = RapidOcrRecognizer(profile_config("fast", threads=1, model_cache_dir=str(tmp_path), reread_head="full"))
    assert full.read_page(image).script == SCRIPT_LATIN
    assert full._full_head is full._rereader is not None


def test_a_japanese_line_on_a_latin_page_is_read_in_its_script(fast):
    """One line of Japanese among English paragraphs: too few unsure lines to check the page's
    script; the line stays unsure after the Latin re-read, so the full head reads it, and its
    reading is kept."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    english = (BUNDLED_DATA / "phototest.gold.txt").read_text()
    page.insert_textbox(pymupdf.Rect(60, 60, 535, 400), english * 2, fontname="helv", fontsize=11)
    page.insert_font(fontname="cjk", fontbuffer=pymupdf.Font("japan").buffer)
    page.insert_text((60, 430), "東京都千代田区の会社で会議が開かれました。", fontname="cjk", fontsize=11)
    read = fast.read_page(_render(page))
    assert read.script == SCRIPT_LATIN and read.flags == ()
    assert "東京都千代田区の会社で会議が開かれました。" in _text(read)
    assert "quick brown dog" in _text(read)


@pytest.mark.slow  # two pages read by the Latin and the full head: 2.5-3 s each
@pytest.mark.parametrize("name", ["japanese_text.pdf", "chinese-tables.pdf"])
def test_cjk_pages_are_read_by_the_recogniser_that_has_their_characters(fast, name):
    image, truth = _page(name)
    read = fast.read_page(image)
    score = char_scores(_text(read), truth)
    assert score.f1 >= 0.95, score
    assert (read.script, read.flags) == (SCRIPT_CJK, ())


@pytest.mark.slow  # the small models over a CJK page, twice: ~5 s
def test_the_accurate_profile_reads_a_cjk_page_through_its_script_check(tmp_path):
    """accurate reads with the small model's Latin head first, like fast: a Japanese page must
    still come back in its script (1.000 character F1 with the full head alone)."""
    accurate = RapidOcrRecognizer(profile_config("accurate", threads=1, model_cache_dir=str(tmp_path)))
    image, truth = _page("japanese_text.pdf")
    read = accurate.read_page(image)
    assert char_scores(_text(read), truth).f1 >= 0.98
    assert (read.script, read.flags) == (SCRIPT_CJK, ())


def test_a_korean_page_is_flagged_not_passed_off_as_symbols(without_other_scripts):
    image, _truth = _page("korean_text.pdf")
    read = without_other_scripts.read_page(image)
    assert read.script == SCRIPT_UNSUPPORTED
    assert read.flags == (FLAG_SCRIPT_UNSUPPORTED,)
    # Whatever is kept was read with confidence; the lookalike symbols are not.
    assert all(line.confidence >= 0.8 for line in read.lines), read.lines


def test_the_page_flag_and_script_reach_the_recognition(without_other_scripts):
    image, _truth = _page("korean_text.pdf")
    height, width = image.shape[:2]
    result = without_other_scripts.recognize(image, [LayoutBox("text", (0, 0, width, height))])
    assert (result.script, result.flags) == (SCRIPT_UNSUPPORTED, (FLAG_SCRIPT_UNSUPPORTED,))


@pytest.mark.slow  # a 4959x7017 sheet: probe, full pass and bands, ~9 s (make test, not test-fast)
def test_a_large_sheet_is_read_in_bands_at_the_scale_its_print_needs(fast):
    """A flatbed-sized sheet (three A4 pages wide and tall, 4959x7017 px at 200 dpi) holding one
    Japanese page in its corner: shrunk to the 2,000-px detection limit its print is ~10 px."""
    doc = pymupdf.open()
    sheet = doc.new_page(width=595 * 3, height=842 * 3)
    with pymupdf.open(SCRIPT_DATA / "japanese_text.pdf") as src:
        sheet.show_pdf_page(pymupdf.Rect(40, 40, 40 + 595, 40 + 842), src, 0)
    image, truth = _render(sheet), sheet.get_text()
    read = fast.read_page(image)
    assert read.detection_pass == FULL_BANDS
    assert char_scores(_text(read), truth).f1 >= 0.95
    # Boxes are on the sheet as submitted: the title line where the page put it.
    title = next(line for line in read.lines if "評価用" in line.text)
    x0, y0, _x1, _y1 = title.bbox
    words = [w for w in sheet.get_text("words") if "評価用" in w[4]]
    assert abs(x0 - words[0][0] * 200 / 72) < 30 and abs(y0 - words[0][1] * 200 / 72) < 30, (title.bbox, words[0])


@pytest.mark.parametrize(
    ("name", "script", "flags"),
    [
        # A dense Hebrew page read by both heads: 2-2.5 s.
        pytest.param("hebtypo.jpg", SCRIPT_UNSUPPORTED, (FLAG_SCRIPT_UNSUPPORTED,), marks=pytest.mark.slow),
        ("devatest.png", SCRIPT_UNSUPPORTED, (FLAG_SCRIPT_UNSUPPORTED,)),
        # A faded all-caps thermal receipt: Latin, however unsure some of its lines.
        ("receipt-lidl.jpg", SCRIPT_LATIN, ()),
    ],
)
def test_real_scans_in_scripts_without_a_recogniser_are_flagged_and_latin_ones_are_not(
    without_other_scripts, name, script, flags
):
    """tesseract-ocr/test's upright Hebrew and Devanagari pages, and a shop receipt (see
    tests/data/README.md, orientation/)."""
    with Image.open(BUNDLED_DATA / "orientation" / name) as img:
        read = without_other_scripts.read_page(np.asarray(img.convert("RGB")))
    assert (read.script, read.flags) == (script, flags)
    if script == SCRIPT_UNSUPPORTED:
        assert all(line.confidence >= 0.8 for line in read.lines)


@pytest.mark.slow  # two pages read by both heads: 2.5-3.5 s each
@pytest.mark.parametrize("name", ["udhr_rus.pdf", "udhr_bul.pdf"])
def test_cyrillic_pages_are_flagged_though_the_full_head_is_sure_of_their_commas(
    without_other_scripts, monkeypatch, name
):
    """The UDHR in Russian and Bulgarian (the evaluation corpus's pages, bench/corpus/files/udhr):
    the full head reads Cyrillic lines as spaces and commas, confidently; that reads nothing. What
    stays reads as words or numbers: no bare punctuation, no Latin lookalikes ("CTaTbA1"). The
    full head reads only the sample's first lines: they read nothing, and the rest of the sample
    (1.3 CPU-s of the page's 4.5) would have told nothing more."""
    full = without_other_scripts._full_head_recognizer()
    read_by_full: list[int] = []
    real = without_other_scripts._read_crops

    def counted(crops, rec=None, **kwargs):  # a spy on the real call, not a stand-in
        if rec is full:
            read_by_full.append(len(crops))
        return real(crops, rec, **kwargs)

    monkeypatch.setattr(without_other_scripts, "_read_crops", counted)
    with pymupdf.open(BUNDLED_DATA.parent.parent / "bench" / "corpus" / "files" / "udhr" / name) as doc:
        read = without_other_scripts.read_page(_render(doc[0]))
    assert (read.script, read.flags) == (SCRIPT_UNSUPPORTED, (FLAG_SCRIPT_UNSUPPORTED,))
    assert read_by_full == [SAMPLE_FIRST]
    assert all(any(c.isalnum() for c in line.text) for line in read.lines), "no lines of bare punctuation"
    share, words = script_misread_share(_text(read))
    assert share < MISREAD_SHARE, (share, words, _text(read)[:300])


def test_a_ukrainian_page_read_confidently_as_latin_lookalikes_is_flagged(without_other_scripts):
    """The UDHR in Ukrainian (bench/corpus/files/udhr): the Latin recogniser reads its lines at
    0.8-0.9 as "HapoAiB 06'eAHaHIx", so no line is unsure and the script check never ran; it was
    done, unflagged, at 0.01 word F1. Words no Latin-script language writes, in no language the
    identifier is sure of, flag it; what is kept reads as words."""
    with pymupdf.open(BUNDLED_DATA.parent.parent / "bench" / "corpus" / "files" / "udhr" / "udhr_ukr.pdf") as doc:
        read = without_other_scripts.read_page(_render(doc[0]))
    assert (read.script, read.flags) == (SCRIPT_UNSUPPORTED, (FLAG_SCRIPT_UNSUPPORTED,))
    share, words = script_misread_share(_text(read))
    assert share < MISREAD_SHARE, (share, words, _text(read)[:300])
    # It kept ~30 lines of bare commas, the recogniser's rendering of Cyrillic words it cannot read.
    assert all(any(c.isalnum() for c in line.text) for line in read.lines), "no lines of bare punctuation"
