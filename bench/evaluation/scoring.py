"""How the evaluation corpus scores a reading against its ground truth. Pure: strings in, numbers out.

Two measures, both bags (order-insensitive: they measure what was read, not the reading order):

- **word F1** (Latin, Cyrillic, Arabic, Hebrew, Devanagari, Korean): ``bench.accuracy.words``, the
  project's word normalisation — Unicode NFKC, typographic quotes and dashes folded to ASCII,
  lower case (``str.lower``: case is not scored, so an all-caps receipt read in capitals or in
  small letters scores the same), punctuation trimmed from each word's edges (``"word,"`` is
  ``word``; inner punctuation stays: ``e-mail``, ``3.50``), tokens without a letter or digit
  dropped. For Hebrew and Arabic the combining marks (nikud, harakat: Unicode category Mn) are
  removed as well: the printed vowel points are optional in both scripts and neither recogniser
  is asked to keep them.
- **character F1** (Chinese, Japanese; also reported for every page): the same NFKC folding and
  lower case, then every character that is not whitespace, punctuation (Unicode P*) or a symbol
  (S*) is one token. CJK text has no spaces between words, so a word bag would score a line as
  one word.

Korean separates words by spaces, so its primary score is word F1; its character F1 is reported
beside it (the issue's Korean figure is character F1).
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass

from bench.accuracy import words as _project_words

# Scripts whose primary measure is character F1.
CHARACTER_SCRIPTS = frozenset({"chinese", "japanese"})
# Scripts whose optional combining marks (vowel points) are removed before scoring.
MARKED_SCRIPTS = frozenset({"hebrew", "arabic"})
_TYPOGRAPHIC = str.maketrans({"’": "'", "‘": "'", "“": '"', "”": '"', "—": "-", "–": "-"})


@dataclass(frozen=True)
class Score:
    precision: float
    recall: float
    f1: float
    matched: int
    predicted: int
    reference: int


def _strip_marks(text: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFD", text) if unicodedata.category(ch) != "Mn")


def word_tokens(text: str, script: str = "latin") -> list[str]:
    if script in MARKED_SCRIPTS:
        text = _strip_marks(text)
    return _project_words(text)


def char_tokens(text: str, script: str = "latin") -> list[str]:
    text = unicodedata.normalize("NFKC", text).translate(_TYPOGRAPHIC).lower()
    if script in MARKED_SCRIPTS:
        text = _strip_marks(text)
    return [ch for ch in text if not ch.isspace() and unicodedata.category(ch)[0] not in "PSZC"]


def bag_f1(predicted: list[str], reference: list[str]) -> Score:
    pred, ref = Counter(predicted), Counter(reference)
    matched = sum((pred & ref).values())
    n_pred, n_ref = sum(pred.values()), sum(ref.values())
    return Score(
        precision=matched / n_pred if n_pred else 0.0,
        recall=matched / n_ref if n_ref else 0.0,
        f1=2 * matched / (n_pred + n_ref) if n_pred + n_ref else 1.0,
        matched=matched,
        predicted=n_pred,
        reference=n_ref,
    )


def word_f1(predicted: str, reference: str, script: str = "latin") -> Score:
    return bag_f1(word_tokens(predicted, script), word_tokens(reference, script))


def char_f1(predicted: str, reference: str, script: str = "latin") -> Score:
    return bag_f1(char_tokens(predicted, script), char_tokens(reference, script))


def primary_measure(script: str) -> str:
    return "char" if script in CHARACTER_SCRIPTS else "word"


def score(predicted: str, reference: str, script: str) -> dict:
    """Both measures and the page's primary one (``f1``), as plain numbers for the run record."""
    words, chars = word_f1(predicted, reference, script), char_f1(predicted, reference, script)
    measure = primary_measure(script)
    return {
        "measure": measure,
        "f1": round(chars.f1 if measure == "char" else words.f1, 4),
        "word_f1": round(words.f1, 4),
        "char_f1": round(chars.f1, 4),
        "recall": round(chars.recall if measure == "char" else words.recall, 4),
        "precision": round(chars.precision if measure == "char" else words.precision, 4),
    }
