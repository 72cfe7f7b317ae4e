"""A page's letters read as its language writes them, decided by the recogniser's own runner-up.

The tiny Latin recogniser knows ``ı`` (Turkish dotless i) and ``ł`` (Polish l with stroke) but
rarely chooses them: on the Turkish Declaration it read 42 of 93 ``ı`` (the rest as ``i``), on
the Polish 18 of 33 ``ł`` (the rest as ``t``); word F1 0.86 and 0.95 against Tesseract's 1.00.
Where it misread, the right letter was its strong runner-up (``ı`` at 7-97 % of ``i``'s
probability), and where ``i`` was right ``ı`` scored under 0.1 %. So, once the page's language is
identified (``language.identify``, sure) and its alphabet known (``language.alphabet``):

- a letter the language does not write (``ü`` or ``ù`` on a Czech page, where ``ů`` was printed)
  gives way to its most probable runner-up that the language writes;
- an ASCII letter gives way to a runner-up that is one of the language's own letters beyond
  ASCII, common in its text (``PREFERRED_MIN_SHARE`` of the letters of the language's sample),
  where the runner-up has ``RUNNER_UP_MIN`` of its probability (``i`` → ``ı``, ``t`` → ``ł``);
- a letter beyond ASCII that the language writes stays as read.

Only the recogniser's runners-up are used (``runners_up``, kept from the pass that read the
line): nothing is read again, no word list is consulted, and a page whose language is not
identified with confidence is left as read.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workers.engines.cpu import language as language_check

# A runner-up this share of the chosen letter's probability replaces it (see the module doc).
RUNNER_UP_MIN = 0.1
# Runners-up kept per character: the few most probable letters at least this share of the chosen
# one's probability (smaller than RUNNER_UP_MIN, so the rule can change without reading again).
KEPT_MIN = 0.02
KEPT_PER_CHAR = 3
# A letter beyond ASCII is preferred where it is at least this share of the language's sample's
# letters: Czech ``ó`` (0.0 %: loanwords) is not, and was read for ``y``.
PREFERRED_MIN_SHARE = 0.003
BLANK = 0  # CTC blank, as rapidocr's CTCLabelDecode ignores it
# A space between two letters is kept as evidence from this probability of the space class: inside
# a word it stays under 0.02 on the Declarations' lines; between two words read as one it reached
# 0.15-0.37 ("zacházení|nebo", "wolności|i").
SPACE_KEPT_MIN = 0.1


@dataclass(frozen=True)
class Runners:
    """The runners-up of one character of a line's reading: its position in the text, the letter
    chosen and ((letter, share of the chosen one's probability), ...), most probable first."""

    position: int
    chosen: str
    letters: tuple[tuple[str, float], ...]
    # Between two letters: the space class's highest probability on the steps before this letter,
    # where it reached SPACE_KEPT_MIN (a space the recogniser nearly wrote: ``lexicon.split``), else 0.
    space_before: float = 0.0


@dataclass(frozen=True)
class LanguageLetters:
    written: frozenset[str]  # the language's letters, both cases
    preferred: frozenset[str]  # those beyond ASCII common in its text, both cases


def greedy_steps(row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A line's per-step probabilities ``row`` (T x classes) decoded as rapidocr decodes them
    (greedy CTC: repeats merged, blanks dropped): the class chosen at each step, and the steps
    that write a character."""
    chosen = row.argmax(axis=1)
    selected = np.ones(len(chosen), dtype=bool)
    selected[1:] = chosen[1:] != chosen[:-1]
    selected &= chosen != BLANK
    return chosen, np.flatnonzero(selected)


def runners_up(
    row: np.ndarray, character: Sequence[str], decoded: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[Runners, ...]:
    """The runners-up (``KEPT_MIN`` and above) of each letter of one line's reading, and the space
    nearly written before it (``Runners.space_before``), from the recogniser's per-step
    probabilities ``row`` (T x classes); ``decoded``: its ``greedy_steps``, where the caller has them
    already."""
    chosen, steps = decoded if decoded is not None else greedy_steps(row)
    if not len(steps):
        return ()
    probs = row[steps]
    best = probs[np.arange(len(steps)), chosen[steps]]
    second = np.partition(probs, -2, axis=1)[:, -2] if probs.shape[1] > 1 else np.zeros(len(steps))
    offsets = np.cumsum([0] + [len(character[c]) for c in chosen[steps]])
    found: dict[int, Runners] = {}
    for k in np.flatnonzero(second >= KEPT_MIN * best):
        letter = character[chosen[steps[k]]]
        if len(letter) != 1 or not letter.isalpha():
            continue
        top = np.argpartition(probs[k], -(KEPT_PER_CHAR + 1))[-(KEPT_PER_CHAR + 1) :]
        ranked = sorted(
            (
                (character[c], float(probs[k, c] / best[k]))
                for c in top
                if c != chosen[steps[k]] and c != BLANK and probs[k, c] >= KEPT_MIN * best[k]
            ),
            key=lambda pair: -pair[1],
        )
        letters = tuple((ch, round(share, 4)) for ch, share in ranked if len(ch) == 1 and ch.isalpha())
        if letters:
            found[int(k)] = Runners(int(offsets[k]), letter, letters)
    for k, share in _spaces_between_letters(row, character, chosen, steps):
        known = found.get(k)
        found[k] = (
            Runners(int(offsets[k]), character[chosen[steps[k]]], (), share)
            if known is None
            else Runners(known.position, known.chosen, known.letters, share)
        )
    return tuple(found[k] for k in sorted(found))


def _spaced_letter(ch: str) -> bool:
    """A letter of a script written with spaces between words (below the CJK blocks)."""
    return ch.isalpha() and ord(ch) < 0x2E80


def _spaces_between_letters(row: np.ndarray, character: Sequence[str], chosen: np.ndarray, steps: np.ndarray):
    """(index of the letter after the gap, the space class's highest probability in the gap) for each
    gap between two letters where it reached SPACE_KEPT_MIN."""
    spaces = gap_spaces(row, character, steps)
    for k in np.flatnonzero(spaces >= SPACE_KEPT_MIN):
        left, right = character[chosen[steps[k - 1]]], character[chosen[steps[k]]]
        if len(left) == len(right) == 1 and _spaced_letter(left) and _spaced_letter(right):
            yield int(k), round(float(spaces[k]), 4)


def gap_spaces(row: np.ndarray, character: Sequence[str], steps: np.ndarray) -> np.ndarray:
    """For each character a line's greedy decoding writes (``steps``, from ``greedy_steps``), the
    space class's highest probability on the steps between it and the character before: 0 for the
    first, for two characters on neighbouring steps, and where the classifier has no space. One
    vectorised pass (it runs on every line, twice: for the spacing and for the runners-up)."""
    out = np.zeros(len(steps), np.float32)
    try:
        space = character.index(" ")  # PP-OCR appends the space class last: one scan, no copy
    except ValueError:
        return out
    gaps = np.flatnonzero(np.diff(steps) >= 2) + 1  # k with a blank step before it
    if len(gaps):
        # Segments [steps[k-1]+1, steps[k]) interleaved with the stretches between them; every
        # other maximum is a gap's.
        bounds = np.column_stack((steps[gaps - 1] + 1, steps[gaps])).ravel()
        out[gaps] = np.maximum.reduceat(row[:, space], bounds)[::2]
    return out


@functools.cache
def language_letters(language: str) -> LanguageLetters | None:
    """The letters ``language`` writes and those it prefers (see the module doc); None when its
    alphabet is unknown."""
    found = language_check.alphabet(language)
    if found is None:
        return None
    lower = set(found.letters)
    written = lower | {ch.upper() for ch in lower if len(ch.upper()) == 1}
    if "ı" in lower:  # Turkish and Azerbaijani: the capital of i is İ
        written.add("İ")
    counts = Counter(ch for ch in found.sample if ch.isalpha())
    total = sum(counts.values()) or 1
    common = {ch for ch in lower if not ch.isascii() and counts[ch] / total >= PREFERRED_MIN_SHARE}
    preferred = common | {ch.upper() for ch in common if len(ch.upper()) == 1 and not ch.upper().isascii()}
    if "ı" in common:
        preferred.add("İ")
    return LanguageLetters(frozenset(written), frozenset(preferred))


def as_written(text: str, runners: Sequence[Runners], letters: LanguageLetters) -> str:
    """``text`` with each letter replaced where the rules of the module doc say so."""
    chars = list(text)
    for runner in runners:
        if runner.position >= len(chars) or chars[runner.position] != runner.chosen:
            continue  # not this reading's character: leave it
        chars[runner.position] = _letter(runner, letters)
    return "".join(chars)


def _letter(runner: Runners, letters: LanguageLetters) -> str:
    strong = [ch for ch, share in runner.letters if share >= RUNNER_UP_MIN]
    if runner.chosen.isascii():
        return next((ch for ch in strong if ch in letters.preferred), runner.chosen)
    if runner.chosen not in letters.written:
        return next((ch for ch in strong if ch in letters.written), runner.chosen)
    return runner.chosen  # a letter of the language's own: French È stays, though É is commoner
