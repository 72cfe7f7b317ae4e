"""Spaces the recogniser nearly wrote (workers/engines/cpu/spacing.py): the rule on a line's own
per-step probabilities, then the real tiny recogniser on real SROIE receipts, where amounts and
their tax codes came out joined (``2.50SR``, ``No.CS00233521``)."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from bench.accuracy import word_scores
from bench.evaluation.corpus import load
from workers.engines.cpu import RapidOcrRecognizer, profile_config
from workers.engines.cpu.spacing import SPACE_MIN, shifted, spaced

CHARACTER = ["blank", "2", ".", "5", "0", "S", "R", " ", "1", ":", "N", "o", "'", "中", "文"]


def _row(text: str, gaps: dict[int, float]) -> np.ndarray:
    """A CTC row reading ``text``: each character on its own step, a blank step after each, where
    the space class gets ``gaps[k]`` of the probability on the blank after character ``k``."""
    steps = []
    for k, ch in enumerate(text):
        hit = np.full(len(CHARACTER), 0.001)
        hit[CHARACTER.index(ch)] = 0.99
        gap = np.full(len(CHARACTER), 0.001)
        gap[0] = 0.99 - gaps.get(k, 0.0)
        gap[CHARACTER.index(" ")] = gaps.get(k, 0.0)
        steps += [hit, gap]
    return np.array(steps, dtype=np.float32)


def test_a_space_the_recogniser_nearly_wrote_between_an_amount_and_its_code_is_written():
    text = "2.50SR"
    assert spaced(_row(text, {3: 0.3}), CHARACTER, text) == ("2.50 SR", (4,))
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


def test_runners_up_positions_follow_the_written_spaces():
    # "2.50SR" spaced after "0" (position 4): S at 4 moves to 5, the digits before stay.
    assert [shifted(p, (4,)) for p in (0, 3, 4, 5)] == [0, 3, 5, 6]


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
