"""Spaces the recogniser nearly wrote (workers/engines/cpu/spacing.py): the rule on a line's own
per-step probabilities, then the real tiny recogniser on real SROIE receipts, where amounts and
their tax codes came out joined (``2.50SR``, ``No.CS00233521``), and on the French minutes, where
one apostrophe came out as two (``l'’avis``)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

from bench.accuracy import word_scores
from bench.evaluation.corpus import load, render_pdf
from workers.engines.cpu import RapidOcrRecognizer, profile_config
from workers.engines.cpu.spacing import SPACE_MIN, spaced

CHARACTER = ["blank", "2", ".", "5", "0", "S", "R", " ", "1", ":", "N", "o", "'", "中", "文", "’", "l", "a"]


def _row(text: str, gaps: dict[int, float], wide: dict[int, int] | None = None) -> np.ndarray:
    """A CTC row reading ``text``: each character on its own step, a blank step after each (and
    ``wide[k]`` more before character ``k``), where the space class gets ``gaps[k]`` of the
    probability on the blank after character ``k``."""
    steps = []
    for k, ch in enumerate(text):
        steps += [np.eye(len(CHARACTER), dtype=np.float32)[0]] * (wide or {}).get(k, 0)
        hit = np.full(len(CHARACTER), 0.001)
        hit[CHARACTER.index(ch)] = 0.99
        gap = np.full(len(CHARACTER), 0.001)
        gap[0] = 0.99 - gaps.get(k, 0.0)
        gap[CHARACTER.index(" ")] = gaps.get(k, 0.0)
        steps += [hit, gap]
    return np.array(steps, dtype=np.float32)


def test_a_space_the_recogniser_nearly_wrote_between_an_amount_and_its_code_is_written():
    text = "2.50SR"
    assert spaced(_row(text, {3: 0.3}), CHARACTER, text) == ("2.50 SR", (0, 1, 2, 3, 5, 6))
    assert spaced(_row(text, {3: SPACE_MIN / 2}), CHARACTER, text) == (text, ())


@pytest.mark.parametrize(
    ("text", "gap"),
    [
        ("1.00", 0),  # inside a number: 1|.00
        ("2.50", 2),  # two digits
        ("SR", 0),  # two letters: the recogniser spaces words itself
        ("No:", 1),  # before closing punctuation
        ("No'S", 1),  # next to an apostrophe
        ("中文", 0),  # no Latin letter: Chinese sets no spaces
    ],
)
def test_no_space_inside_a_number_a_word_or_before_closing_punctuation(text, gap):
    assert spaced(_row(text, {gap: 0.6}), CHARACTER, text) == (text, ())


def test_a_text_that_is_not_the_rows_reading_is_left_as_it_is():
    assert spaced(_row("2.50SR", {3: 0.5}), CHARACTER, "2.5SR") == ("2.5SR", ())


def test_an_apostrophe_read_twice_between_letters_is_written_once():
    text = "l'’a"
    assert spaced(_row(text, {}), CHARACTER, text) == ("l'a", (0, 1, None, 2))
    # Far apart (two glyphs printed), at a word's edge, or one apostrophe: as read.
    assert spaced(_row(text, {}, wide={2: 3}), CHARACTER, text) == (text, ())
    assert spaced(_row("l'’", {}), CHARACTER, "l'’") == ("l'’", ())
    assert spaced(_row("l'a", {}), CHARACTER, "l'a") == ("l'a", ())


@pytest.fixture(scope="module")
def fast(tmp_path_factory):
    return RapidOcrRecognizer(profile_config("fast", threads=1, model_cache_dir=str(tmp_path_factory.mktemp("m"))))


@pytest.mark.slow  # two receipts read by the fast profile: ~1 s each
@pytest.mark.parametrize(
    ("receipt", "joined", "at_least"),
    [
        # Before: 0.839 and 0.879 (Tesseract 5.5.4 on the same pixels: 0.899 and 0.931).
        ("receipt-455", {"2.50sr", "3.50sr", "30.00sr", "21.00sr", "no.cs00233521"}, 0.88),
        ("receipt-559", {"0.40zrl"}, 0.89),
    ],
)
def test_receipt_amounts_and_their_tax_codes_are_read_apart(fast, receipt, joined, at_least):
    doc = next(d for d in load() if d.id == receipt)
    with Image.open(doc.file) as img:
        read = fast.read_page(np.asarray(img.convert("RGB")))
    text = "\n".join(line.text for line in read.lines)
    words = {w.lower() for w in text.split()}
    assert not words & joined, words & joined
    assert word_scores(text, doc.truth_text(1)).f1 >= at_least


@pytest.mark.slow  # a legal-size page read by the fast profile: ~1 s
def test_the_french_minutes_apostrophe_is_written_once(fast):
    """pdfplumber's 2023-06-20 minutes, page 2 at 100 dpi: ``l’avis`` came out ``l'’avis`` (word F1
    0.986 against Tesseract's 1.000 on the same pixels)."""
    doc = next(d for d in load() if d.id == "pv-2023-06-20")
    read = fast.read_page(render_pdf(doc.file, 2, 100)[0])
    text = "\n".join(line.text for line in read.lines)
    assert not re.search(r"\w['’‘][’'‘]\w", text), re.findall(r"\S*['’‘][’'‘]\S*", text)
    assert word_scores(text, doc.truth_text(2)).f1 >= 0.99
