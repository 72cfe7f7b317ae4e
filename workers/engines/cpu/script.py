"""Which script a page is written in, judged from what the recognisers read, not guessed.

The default recogniser (PP-OCRv6 tiny with its classifier cut to Latin, ``models.latin_rec_model``)
cannot answer anything but Latin, Greek and symbols: a Chinese, Japanese or Korean line comes back
as a string of lookalike symbols. It does come back unsure, though: on the dev set's Latin pages
few lines read under ``UNSURE_BELOW``, on CJK and Korean pages most do (docs/benchmarks.md,
"Script and scale"). So a page whose share of unsure lines reaches ``CHECK_SHARE`` has a
sample of those lines read again by the full-head small model (Han, kana, Latin; 18,708 classes),
and what that reading is made of decides:

* ``cjk``: the sample reads confidently and CJK characters (Han, kana, CJK punctuation) make up
  ``CJK_SHARE_MIN`` of it: the whole page is read by the full-head model (``SCRIPT_CJK``).
* ``latin``: the sample reads confidently but is not CJK (a faint or small-print Latin page): the
  page keeps what the Latin recogniser read.
* ``unsupported``: neither recogniser reads the sample with confidence, or the full head is sure
  of almost nothing in it (spaces and commas: what it makes of Cyrillic, ``MIN_CHARS_PER_HEIGHT``). No recogniser in a wheel
  knows Hangul, Cyrillic, Arabic, Hebrew or Devanagari (the registries were searched:
  docs/benchmarks.md): such a page is read by Tesseract's model for its script where one is
  installed and reads it with confidence (``other_scripts``), and is otherwise flagged
  ``script:unsupported`` rather than passed off as read. A Latin page too damaged for either recogniser to read with confidence is flagged the
  same way: the flag says no recogniser here could read it, whatever the cause.

* A page read with confidence can still be misread: the Latin recogniser reads Ukrainian print,
  whose capitals and many lowercase letters look Latin, at 0.8-0.9 as "HapoAiB 06'eAHaHIx". Words
  no Latin-script language writes (``looks_misread``), with no language the identifier is sure
  of, flag such a page ``script:unsupported`` too (``RapidOcrRecognizer._misread``).

Pages that never reach the check are ``latin``: the check costs nothing on them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ocrsite.vocabulary import PageFlag

SCRIPT_LATIN = "latin"
SCRIPT_CJK = "cjk"
SCRIPT_UNSUPPORTED = "unsupported"

FLAG_SCRIPT_UNSUPPORTED = str(PageFlag.SCRIPT_UNSUPPORTED)

# A line the Latin recogniser reads under this confidence is unsure (its CTC path's mean probability).
UNSURE_BELOW = 0.8
# The share of a page's lines that must be unsure before the page's script is checked, and the
# fewest unsure lines that trigger it (one odd line on a three-line page is not evidence).
CHECK_SHARE = 0.2
CHECK_MIN_LINES = 2
# How many unsure lines the full-head model reads to judge the script (the widest first: they
# hold the most characters).
SAMPLE_LINES = 12
# The sample is read in two steps: its first SAMPLE_FIRST lines, and the rest only where those do
# not already read as far under SURE_ABOVE as NOTHING_READ_BELOW (a script neither PP-OCR model
# has: the full head reads almost nothing of Cyrillic, Hangul, Arabic or Hebrew print). Wide lines
# of the full head cost ~0.16 CPU-s each, and on such a page the eight more told nothing: on every
# page of the corpus read at 0° the first four lines' verdict was the twelve's (docs/benchmarks.md).
SAMPLE_FIRST = 4
NOTHING_READ_BELOW = 0.6
# The full-head reading of the sample must reach this confidence (character-weighted mean) to
# count as read at all; its CJK characters must make up this share of it to make the page CJK.
SURE_ABOVE = 0.8
CJK_SHARE_MIN = 0.3
# A line of print holds about one character per line height (CJK) to two (Latin); a reading of a
# sampled line with under this many letters or digits per line height has read almost nothing.
MIN_CHARS_PER_HEIGHT = 0.25
# A confident Latin reading is of words no Latin-script language writes when at least this share
# of its words (MISREAD_MIN_WORDS or more) change case inside or mix letters and digits:
# "HapoAiB", "06'eAHaHIx", the Latin recogniser's confident reading of Ukrainian print, where
# Cyrillic capitals and lowercase letters look like Latin ones. Latin text has few such words
# (the corpus's Latin truth texts: at most 0.2% of words; units such as 10kg and codes such as
# A4 are the usual ones), so the check stands on more than a page of part numbers.
MISREAD_SHARE = 0.3
MISREAD_MIN_WORDS = 20
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class ScriptCheck:
    script: str
    confidence: float  # the sample's character-weighted confidence under the full-head model
    cjk_share: float  # share of the sample's characters that are CJK

    @property
    def flags(self) -> tuple[str, ...]:
        return (FLAG_SCRIPT_UNSUPPORTED,) if self.script == SCRIPT_UNSUPPORTED else ()


def is_cjk(ch: str) -> bool:
    """Han ideographs (and their extensions and compatibility forms), kana, CJK punctuation and
    full-width forms."""
    o = ord(ch)
    return (
        0x3000 <= o <= 0x30FF  # CJK symbols and punctuation, hiragana, katakana
        or 0x31F0 <= o <= 0x31FF  # katakana phonetic extensions
        or 0x3400 <= o <= 0x4DBF  # extension A
        or 0x4E00 <= o <= 0x9FFF  # unified ideographs
        or 0xF900 <= o <= 0xFAFF  # compatibility ideographs
        or 0xFF00 <= o <= 0xFFEF  # half- and full-width forms
        or 0x20000 <= o <= 0x3FFFF  # extensions B-H
    )


def needs_check(scores: Sequence[float]) -> bool:
    """Whether the Latin recogniser's confidences over a page's lines say its script must be checked."""
    unsure = sum(1 for s in scores if s < UNSURE_BELOW)
    # Every line unsure is evidence however few there are: a one-word image in Arabic read under
    # the Latin head was kept as nothing, unflagged.
    return (unsure >= CHECK_MIN_LINES or unsure == len(scores) > 0) and unsure >= CHECK_SHARE * len(scores)


def sample(scores: Sequence[float], widths: Sequence[float], n: int = SAMPLE_LINES) -> list[int]:
    """Indices of up to ``n`` unsure lines, the widest first."""
    unsure = [i for i, s in enumerate(scores) if s < UNSURE_BELOW]
    return sorted(unsure, key=lambda i: -widths[i])[:n]


def judge(readings: Sequence[tuple[str, float]], widths: Sequence[float] | None = None) -> ScriptCheck:
    """The script of a page from the full-head model's ``(text, confidence)`` on its sampled lines;
    ``widths``: each line crop's width in line heights. A reading with fewer than
    ``MIN_CHARS_PER_HEIGHT`` letters or digits per line height read nothing there, however sure it
    is of its spaces and commas (what the full head makes of Cyrillic), and counts as unread."""
    if widths is not None:
        readings = [
            (t, s) if sum(c.isalnum() for c in t) >= MIN_CHARS_PER_HEIGHT * w else ("", 0.0)
            for (t, s), w in zip(readings, widths, strict=True)
        ]
    chars = sum(len(t.strip()) for t, _ in readings)
    if not chars:
        return ScriptCheck(SCRIPT_UNSUPPORTED, 0.0, 0.0)
    confidence = sum(s * len(t.strip()) for t, s in readings) / chars
    cjk = sum(1 for t, _ in readings for c in t if is_cjk(c)) / chars
    if confidence < SURE_ABOVE:
        return ScriptCheck(SCRIPT_UNSUPPORTED, round(confidence, 4), round(cjk, 4))
    return ScriptCheck(SCRIPT_CJK if cjk >= CJK_SHARE_MIN else SCRIPT_LATIN, round(confidence, 4), round(cjk, 4))


def misread_share(text: str) -> tuple[float, int]:
    """(share of odd-shaped words, how many words were judged) in a reading: a word of two letters
    or more is odd unless it is lower case, upper case or capitalised and holds no digit."""
    words = [w for w in _WORD.findall(text) if len(w) >= 3 and sum(c.isalpha() for c in w) >= 2]
    if not words:
        return 0.0, 0
    odd = sum(
        1
        for w in words
        if any(c.isdigit() for c in w) or not (w.islower() or w.isupper() or (w[0].isupper() and w[1:].islower()))
    )
    return odd / len(words), len(words)


def looks_misread(text: str, min_words: int = MISREAD_MIN_WORDS) -> bool:
    """Whether a confident reading is made of words no Latin-script language writes (``MISREAD_SHARE``)."""
    share, words = misread_share(text)
    return words >= min_words and share >= MISREAD_SHARE


def script_of(readings: Sequence[tuple[str, float]]) -> str:
    """The script of a page that needed no check: CJK when CJK characters make up
    ``CJK_SHARE_MIN`` of what was read with confidence (a full-head profile reading a CJK page
    well), else Latin."""
    sure = [t for t, s in readings if s >= UNSURE_BELOW]
    chars = sum(len(t.strip()) for t in sure)
    cjk = sum(1 for t in sure for c in t if is_cjk(c))
    return SCRIPT_CJK if chars and cjk / chars >= CJK_SHARE_MIN else SCRIPT_LATIN
