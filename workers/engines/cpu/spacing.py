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

The same decoding shows one more join the recogniser gets wrong: a wide apostrophe read on two
neighbouring steps as two apostrophes of different classes (``'`` then ``’``), so the French
minutes' ``l'avis`` came out ``l'’avis``. Two apostrophes between two letters, emitted on steps at
most ``APOSTROPHE_STEPS`` apart, are written once (the first): no language writes two there.

Pure: a line's per-step probabilities and its decoded text in, the spaced text out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workers.engines.cpu.letters import gap_spaces, greedy_steps

# The space class's probability, on a step between two characters, that writes a space there.
SPACE_MIN = 0.2
# Apostrophes: two of them between letters, this many steps apart or fewer, are one glyph read twice.
APOSTROPHES = frozenset("'’‘`´")
APOSTROPHE_STEPS = 2
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
    # Inside a number: 3.|50 (1|.00 is closing punctuation, above).
    return not (left in ".," and right.isdigit() and i > 0 and text[i - 1].isdigit())


def spaced(
    row: np.ndarray, character: Sequence[str], text: str, decoded: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[str, tuple[int | None, ...]]:
    """``text`` (the greedy decoding of ``row``, T x classes) with a space where the module doc
    says and an apostrophe read twice written once, and where each of ``text``'s characters went
    (its position in the new text, None where it was dropped; empty when nothing changed), for the
    runners-up's offsets. ``text`` unchanged where it is not ``row``'s decoding. ``decoded``:
    ``row``'s ``letters.greedy_steps``, where the caller has them already."""
    if not any(ch.isascii() and ch.isalnum() for ch in text):
        return text, ()  # no Latin letter or digit: nothing here can take a space
    chosen, steps = decoded if decoded is not None else greedy_steps(row)
    letters = [character[c] for c in chosen[steps]]
    if "".join(letters) != text or any(len(ch) != 1 for ch in letters):
        return text, ()
    spaces = gap_spaces(row, character, steps)  # 0 for the first character: nothing before it
    out: list[str] = []
    moved: list[int | None] = []
    for k, ch in enumerate(text):
        if _read_twice(text, k, steps):
            moved.append(None)
            continue
        if spaces[k] >= SPACE_MIN and _spaceable(text, k - 1):
            out.append(" ")
        moved.append(len(out))
        out.append(ch)
    new = "".join(out)
    return (new, tuple(moved)) if new != text else (text, ())


def _read_twice(text: str, k: int, steps: np.ndarray) -> bool:
    """Whether ``text[k]`` is the second of two apostrophes between letters: one glyph read twice."""
    if k < 2 or k + 1 >= len(text) or text[k] not in APOSTROPHES or text[k - 1] not in APOSTROPHES:
        return False
    return text[k - 2].isalpha() and text[k + 1].isalpha() and steps[k] - steps[k - 1] <= APOSTROPHE_STEPS
