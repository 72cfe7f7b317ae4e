"""Spaces the recogniser nearly wrote, written, where a word meets a number or a sign.

The PP-OCR recognisers (greedy CTC) write a space only where the space class wins a step; on
tight print (thermal receipts, dot-matrix) the gap between ``2.50`` and ``SR`` or between ``No.``
and ``CS00233521`` is read as blanks, the space class second at 0.2-0.5, and the line comes out
``2.50SR``, ``No.CS00233521``: tokens no reader searches for (SROIE receipt 455: word F1 0.84
against Tesseract's 0.90). Inside a word or a number the space class stays far lower (under 0.15
on the same receipts) except between letters the recogniser spaced wrongly itself, so:

- a space is written between two characters where the space class reached ``SPACE_MIN`` on a step
  between them (the recogniser's own runner-up, nothing read again);
- only where the two sides differ in kind (a digit and a letter, a letter or digit and a sign):
  never between two letters or two digits (``WAN SHENG``'s ``HE|NG`` reached 0.10, other words
  more), never inside a number (``1|.00``, ``6929|,012``), never next to an apostrophe or hyphen
  (``D'sara``, ``012-659``), never before closing punctuation or after an opening bracket (``Tender:``,
  ``6%``), where print sets no space;
- only between Latin letters, digits and ASCII signs: Chinese and Japanese set no spaces.

Pure: a line's per-step probabilities and its decoded text in, the spaced text out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# The space class's probability, on a step between two characters, that writes a space there.
SPACE_MIN = 0.2
BLANK = 0  # CTC blank, as rapidocr's CTCLabelDecode ignores it
# No space next to these: they join (``D'sara``, ``012-659``, ``14/04/2018``).
JOINERS = frozenset("'’-–/")
# Nor before closing punctuation, nor after an opening bracket.
CLOSING = frozenset(".,:;!?)]}%")
OPENING = frozenset("([{")


def _kind(ch: str) -> str | None:
    if ch.isdigit() and ch.isascii():
        return "digit"
    if ch.isalpha() and ord(ch) < 0x2E80:  # below the CJK blocks
        return "letter"
    if ch.isascii() and not ch.isalnum() and not ch.isspace():
        return "sign"
    return None


def _spaceable(text: str, i: int) -> bool:
    """Whether a space may go between ``text[i]`` and ``text[i + 1]`` (the module doc's rules)."""
    left, right = text[i], text[i + 1]
    kinds = (_kind(left), _kind(right))
    if None in kinds or kinds[0] == kinds[1]:
        return False
    if left in JOINERS or right in JOINERS or right in CLOSING or left in OPENING:
        return False
    # Inside a number: 1|.00, 3.|50
    before = text[i - 1] if i > 0 else ""
    after = text[i + 2] if i + 2 < len(text) else ""
    if left.isdigit() and right in ".," and after.isdigit():
        return False
    return not (left in ".," and right.isdigit() and before.isdigit())


def spaced(row: np.ndarray, character: Sequence[str], text: str) -> tuple[str, tuple[int, ...]]:
    """``text`` (the greedy decoding of ``row``, T x classes) with a space where the module doc
    says, and the positions in ``text`` before which one was written (for the runners-up's
    offsets). ``text`` unchanged where it is not ``row``'s decoding, or the model has no space."""
    if not any(ch.isascii() and ch.isalnum() for ch in text):
        return text, ()  # no Latin letter or digit: nothing here can take a space
    try:
        space = list(character).index(" ")
    except ValueError:
        return text, ()
    chosen = row.argmax(axis=1)
    selected = np.ones(len(chosen), dtype=bool)
    selected[1:] = chosen[1:] != chosen[:-1]
    selected &= chosen != BLANK
    steps = np.flatnonzero(selected)
    letters = [character[c] for c in chosen[steps]]
    if "".join(letters) != text or any(len(ch) != 1 for ch in letters):
        return text, ()
    inserted = []
    for k in range(len(steps) - 1):
        if steps[k + 1] - steps[k] < 2 or not _spaceable(text, k):
            continue
        if float(row[steps[k] + 1 : steps[k + 1], space].max()) >= SPACE_MIN:
            inserted.append(k + 1)
    if not inserted:
        return text, ()
    out, last = [], 0
    for at in inserted:
        out += [text[last:at], " "]
        last = at
    out.append(text[last:])
    return "".join(out), tuple(inserted)


def shifted(position: int, inserted: Sequence[int]) -> int:
    """A character's position in the spaced text, from its position in the text as decoded."""
    return position + sum(1 for at in inserted if at <= position)
