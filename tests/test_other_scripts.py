"""Pages in scripts the PP-OCR wheels lack, read by Tesseract's model for their script, chosen by
reading (workers/engines/cpu/other_scripts.py): real models (tesserocr's wheel, Debian's
``tesseract-ocr-script-*`` and ``tesseract-ocr-kor`` data: ``bash .ci/script-models.sh``) on real
pages, no mocks. Without those models these pages are flagged, not read
(tests/test_script_routing.py, tests/test_language_routing.py).

Before: the Korean, Russian and Devanagari pages were done with ``script:unsupported`` and only
their digits kept (word F1 0.00-0.01 on the evaluation corpus's Declarations), the Vietnamese one
with ``language:unsupported`` at 0.43."""

from __future__ import annotations

import numpy as np
import pymupdf
import pytest
from PIL import Image

from bench.accuracy import word_scores
from bench.evaluation.corpus import FILES, render_pdf
from tests.support.documents import BUNDLED_DATA
from workers.engines.cpu import RapidOcrRecognizer, profile_config
from workers.engines.cpu.other_scripts import OtherScriptReader
from workers.engines.cpu.script import FLAG_SCRIPT_UNSUPPORTED, SCRIPT_LATIN, SCRIPT_UNSUPPORTED

READER = OtherScriptReader.find()
pytestmark = pytest.mark.skipif(
    READER is None,
    reason="Tesseract's models for other scripts are not installed here (bash .ci/script-models.sh installs them)",
)


@pytest.fixture(scope="module")
def fast(tmp_path_factory):
    return RapidOcrRecognizer(profile_config("fast", threads=1, model_cache_dir=str(tmp_path_factory.mktemp("m"))))


def _text(read) -> str:
    return "\n".join(line.text for line in read.lines)


def _pdf_page(path) -> np.ndarray:
    return render_pdf(path, 1, 200)[0]


def _image(path) -> np.ndarray:
    with Image.open(path) as img:
        return np.asarray(img.convert("RGB"))


@pytest.mark.slow  # a dense page, its script check and each line read by Tesseract: 4-7 s each
@pytest.mark.parametrize(
    ("page", "script", "truth"),
    [
        (lambda: _pdf_page(FILES / "udhr" / "udhr_rus.pdf"), "cyrillic", FILES / "udhr" / "udhr_rus-p1.txt"),
        (lambda: _pdf_page(BUNDLED_DATA / "script" / "korean_text.pdf"), "hangul", None),
        (lambda: _image(BUNDLED_DATA / "orientation" / "devatest.png"), "devanagari", None),
    ],
    ids=["udhr-russian", "korean", "devanagari-scan"],
)
def test_a_page_in_a_script_the_wheels_lack_is_read_by_its_scripts_model(fast, page, script, truth):
    read = fast.read_page(page())
    assert (read.script, read.flags) == (script, ()), _text(read)[:300]
    text = _text(read)
    if truth is not None:
        assert word_scores(text, truth.read_text()).f1 >= 0.97
    elif script == "hangul":
        with pymupdf.open(BUNDLED_DATA / "script" / "korean_text.pdf") as doc:
            assert word_scores(text, doc[0].get_text()).f1 >= 0.95
    else:  # tesseract-ocr/test's Devanagari scan has no truth file: its first line, typed by eye
        assert "सभी मनुष्यों को गौरव और अधिकारों के मामले में जन्मजात" in text
    assert all(line.confidence >= 0.5 for line in read.lines)


@pytest.mark.slow  # a dense page read, its language checked, read again by Tesseract: ~6 s
def test_the_vietnamese_declaration_is_read_with_its_tone_marks(fast, monkeypatch):
    """Identified as Vietnamese, a language whose letters the Latin recogniser cannot write, the
    page is read by the Vietnamese model instead of being flagged, and before its unsure lines
    are read again by the re-reader, whose reading the Vietnamese model's would replace (that
    was ~4.9 of the page's 7 CPU-s)."""
    reread = []
    original = fast._reread_unsure
    monkeypatch.setattr(fast, "_reread_unsure", lambda *a, **k: reread.append(1) or original(*a, **k))
    read = fast.read_page(_pdf_page(FILES / "udhr" / "udhr_vie.pdf"))
    assert not reread
    assert (read.script, read.flags) == (SCRIPT_LATIN, ())
    text = _text(read)
    assert "Tuyên ngôn toàn thế giới về nhân quyền" in text
    assert word_scores(text, (FILES / "udhr" / "udhr_vie-p1.txt").read_text()).f1 >= 0.94  # 0.43 before


@pytest.mark.slow  # the page read, its script checked and sampled by every model: ~4 s
def test_a_page_no_model_reads_either_way_up_keeps_its_flag(fast):
    """The Korean page upside down: neither the PP-OCR models nor any Tesseract model reads its
    lines with confidence, so it stays flagged and nothing lookalike is kept."""
    image = np.ascontiguousarray(np.rot90(_pdf_page(BUNDLED_DATA / "script" / "korean_text.pdf"), 2))
    read = fast.read_page(image)
    assert (read.script, read.flags) == (SCRIPT_UNSUPPORTED, (FLAG_SCRIPT_UNSUPPORTED,))
    assert all(line.confidence >= 0.8 for line in read.lines)


def test_latin_lines_are_not_claimed_by_another_scripts_model():
    """English lines read by every other script's model: some read them at 0.5-0.8, none clearly
    best, so none is chosen (a Latin page the script check took for another script keeps its flag
    rather than becoming Cyrillic or Hangul)."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=300)
    lines = [
        "The quick brown fox jumps over the lazy dog near the river bank.",
        "Invoice number 4471 was paid in full on the third of March.",
        "Please return the signed form to the office before Friday noon.",
    ]
    for i, line in enumerate(lines):
        page.insert_text((40, 60 + 40 * i), line, fontname="helv", fontsize=12)
    pix = page.get_pixmap(dpi=200, colorspace=pymupdf.csRGB, alpha=False)
    image = np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.width, 3)
    crops = []
    for block in page.get_text("dict")["blocks"]:
        for line in block["lines"]:
            x0, y0, x1, y1 = (round(v * 200 / 72) for v in line["bbox"])
            crops.append(np.ascontiguousarray(image[max(0, y0 - 6) : y1 + 6, max(0, x0 - 6) : x1 + 6, ::-1]))
    assert len(crops) == 3
    assert READER.identify(crops) is None  # every installed model but the Latin script's
    # ... while the Vietnamese model, a Latin script's, reads English as surely as its own.
    assert READER.identify(crops, ["vietnamese"]) is not None


LANGUAGE_MODELS = pytest.mark.skipif(
    READER is None or any(READER.language_model(code) is None for code in ("pl", "cs", "tr")),
    reason="Tesseract's Polish, Czech and Turkish models are not installed here (bash .ci/script-models.sh installs them)",
)


@LANGUAGE_MODELS
@pytest.mark.slow  # each page read twice, once with the language model's second reading: ~6 s each
@pytest.mark.parametrize(
    ("name", "at_least", "gains"),
    [("udhr_pol", 0.995, True), ("udhr_ces", 0.995, False), ("udhr_tur", 0.99, True)],
)
def test_words_a_language_does_not_use_are_read_again_by_its_model(fast, tmp_path, name, at_least, gains):
    """The Declaration in Polish, Czech and Turkish: the lines still holding a word the language
    does not use after the runners-up had their say are read by Tesseract's model for the page's
    language and its words kept where the vocabulary or the recogniser's runners-up agree
    (recognizer._reread_unknown_words). Word F1 without the second reading on 2026-12-07 (morning):
    0.986, 0.994, 0.980 (Tesseract alone, with the same models: 1.000, 1.000, 0.997). Since words
    read as one are split by the runners-up (lexicon.split), the Czech page reads 0.997 without the
    second reading as with it: there the second reading must only do no harm."""
    page = _pdf_page(FILES / "udhr" / f"{name}.pdf")
    truth = (FILES / "udhr" / f"{name}-p1.txt").read_text()
    alone = RapidOcrRecognizer(profile_config("fast", threads=1, other_scripts=False, model_cache_dir=str(tmp_path)))
    before = word_scores(_text(alone.read_page(page)), truth).f1
    read = fast.read_page(page)
    assert (read.script, read.flags) == (SCRIPT_LATIN, ())
    after = word_scores(_text(read), truth).f1
    assert after >= at_least and (after > before if gains else after >= before), (before, after)


@LANGUAGE_MODELS
def test_an_english_page_is_not_read_again(tmp_path):
    """English is written with no letter beyond ASCII, which the PP-OCR models were trained on:
    its unknown words (names, codes) are not read again, and no Tesseract model is loaded."""
    ocr = RapidOcrRecognizer(profile_config("fast", threads=1, model_cache_dir=str(tmp_path)))
    read = ocr.read_page(_image(FILES / "tesseract-test" / "phototest.tif"))
    assert "quick brown dog" in _text(read)
    assert ocr._other_scripts is None or not ocr._other_scripts._apis  # models load on first need


def test_a_languages_model_is_found_by_its_iso_639_1_code():
    """CLD2 says ``pl``; Debian's package and Tesseract's file say ``pol``."""
    assert READER.language_model("pl") in (None, "pol")
    assert READER.language_model("xx-not-a-language") is None
    assert READER.language_model("en") == ("eng" if (READER.folder / "eng.traineddata").is_file() else None)
