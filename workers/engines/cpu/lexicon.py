"""A word the page's language does not use, read again from the recogniser's own runners-up: where
one or two of its letters' runners-up make it a word the language uses, that word is kept.

``letters`` decides a letter by the language's alphabet alone, so it cannot tell ``t`` from ``ł``
in ``artykut`` (both Polish letters) or ``i`` from ``l`` in ``woiności``; the recogniser had the
right letter as a runner-up and the word as read is no Polish word. The judge is the language's
own vocabulary: ``wordfreq`` (Apache-2.0 code, CC-BY-SA data in the wheel; 40-odd languages), its
*small* lists: the words used at least once in a million (Zipf 3; Zipf is log10 of uses per
billion words), 4-10 MB resident a language where its full lists take 35-70 MB, which a worker
that meets a few languages would keep. A word is read again only when

- the page's language was identified with confidence (``language.identify``) and wordfreq knows it;
- the word as read is not in that list;
- a candidate made of the recogniser's runners-up (at most ``MAX_CHANGES`` letters changed, each
  runner-up at least ``letters.KEPT_MIN`` of the chosen letter's probability) is; the fewest
  changes win, then the most used word.

Nothing is read again and no letter the recogniser did not offer is ever written: names, codes
and numbers stay as read unless the recogniser itself offered a known word.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence

from workers.engines.cpu.letters import Runners

# wordfreq's list: the words used at least once in a million (Zipf 3 and above; others read 0).
WORDLIST = "small"
# At most this many letters of one word are changed.
MAX_CHANGES = 2
# Words shorter than this are left alone: too many short words are known in every language.
MIN_LETTERS = 4
_WORD = re.compile(r"[^\W\d_]+")


@functools.cache
def covers(language: str) -> bool:
    """Whether wordfreq has a word list for ``language`` (a CLD2 code such as ``pl``)."""
    from wordfreq import available_languages

    return language in available_languages(WORDLIST)


@functools.lru_cache(maxsize=65536)
def zipf(word: str, language: str) -> float:
    from wordfreq import zipf_frequency

    return zipf_frequency(word, language, wordlist=WORDLIST)


def corrected(text: str, runners: Sequence[Runners], language: str) -> str:
    """``text`` with each unknown word replaced by the most used known word its runners-up spell
    (see the module doc); ``text`` itself where none does or ``language`` is not covered."""
    if not runners or not covers(language):
        return text
    by_position = {r.position: r for r in runners}
    chars = list(text)
    for match in _WORD.finditer(text):
        start, end = match.span()
        word = match.group()
        if end - start < MIN_LETTERS or zipf(word.lower(), language) > 0:
            continue
        options = [
            (i, tuple(_in_case(ch, text[i]) for ch, _share in by_position[i].letters))
            for i in range(start, end)
            if i in by_position
        ]
        best = _best_spelling(word, start, options, language)
        if best is not None:
            chars[start:end] = best
    return "".join(chars)


def _best_spelling(word: str, start: int, options: list[tuple[int, tuple[str, ...]]], language: str) -> str | None:
    best, best_zipf = None, 0.0
    for k in range(1, MAX_CHANGES + 1):
        for chosen in itertools.combinations(options, k):
            for letters in itertools.product(*(alternatives for _i, alternatives in chosen)):
                spelled = list(word)
                for (i, _alternatives), letter in zip(chosen, letters, strict=True):
                    spelled[i - start] = letter
                candidate = "".join(spelled)
                found = zipf(candidate.lower(), language)
                if found > best_zipf:
                    best, best_zipf = candidate, found
        if best is not None:
            return best  # fewest changes first: a one-letter fix beats a more used two-letter one
    return None


def _in_case(letter: str, read: str) -> str:
    """A runner-up in the case of the letter it would replace (the recogniser's classes have both)."""
    if read.isupper() and len(letter.upper()) == 1:
        return letter.upper()
    return letter.lower() if read.islower() else letter
