"""Conservation: every word of a page's text layer reaches the result, as a multiset.

The text layer is the ground truth of a born-digital page, so what the result carries can be
checked against it exactly: a Counter compare, cheap enough to run on every page as it is built.
Words are compared as the PDF spells them (no case folding, no punctuation trimming): a table
builder that splits "0.965" into "0965" and "." fails the check, which is the point.

A word hyphenated at the end of its line counts as found whether the result keeps the two
halves ("exam-", "ple") or mends them ("example" or "exam-ple"), so a consumer may de-hyphenate.
Pure: positioned words in, a verdict out; no PDF library, no Django.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# A word's place in the text layer: (block, line, word) numbers, as PyMuPDF's "words" give them.
WordKey = tuple[int, int, int]


@dataclass(frozen=True)
class Verdict:
    """What the result misses (words of the page it does not carry) and repeats (words it carries
    more often than the page prints them). ``held`` is True when nothing is missing."""

    expected: int
    missing: Counter
    repeated: Counter

    @property
    def held(self) -> bool:
        return not self.missing

    def describe(self, limit: int = 12) -> str:
        lost = sorted(self.missing.elements())
        shown = " ".join(lost[:limit]) + (" …" if len(lost) > limit else "")
        return f"{len(lost)} of {self.expected} words missing: {shown}"


@dataclass(frozen=True)
class _Item:
    """One word of the page, or a word split by a line-end hyphen with its two halves."""

    whole: tuple[str, ...]
    halves: tuple[str, ...] = ()


def source_items(words: Sequence[tuple]) -> list[_Item]:
    """The page's words (PyMuPDF ``get_text("words")`` tuples: x0, y0, x1, y1, text, block,
    line, word), a line-end hyphenated word joined with the first word of the next line."""
    # Split as the result's text is split (PyMuPDF keeps a word with a thin space whole).
    words = [(*w[:4], piece, *w[5:]) for w in words for piece in w[4].split()]
    items: list[_Item] = []
    i = 0
    while i < len(words):
        text = words[i][4]
        nxt = words[i + 1] if i + 1 < len(words) else None
        if nxt is not None and _hyphen_break(words[i], nxt):
            items.append(_Item(whole=(text[:-1] + nxt[4], text + nxt[4]), halves=(text, nxt[4])))
            i += 2
            continue
        items.append(_Item(whole=(text,)))
        i += 1
    return items


def _hyphen_break(word: tuple, nxt: tuple) -> bool:
    text = word[4]
    last_of_line = (word[5], word[6]) != (nxt[5], nxt[6])
    same_block = word[5] == nxt[5]
    return len(text) > 1 and text.endswith("-") and text[-2].isalpha() and last_of_line and same_block


def result_words(texts: Iterable[str]) -> Counter:
    """Words the result carries: every text split at whitespace."""
    found: Counter = Counter()
    for text in texts:
        found.update(text.split())
    return found


def check(words: Sequence[tuple], carried: Counter) -> Verdict:
    """Compare the page's words with the words the result carries."""
    left = Counter(carried)
    missing: Counter = Counter()
    items = source_items(words)
    # Whole words first, so a mended word never takes the half of another word that is printed whole.
    split: list[_Item] = []
    for item in items:
        if not item.halves:
            if left[item.whole[0]] > 0:
                left[item.whole[0]] -= 1
            else:
                missing[item.whole[0]] += 1
        else:
            split.append(item)
    for item in split:
        whole = next((w for w in item.whole if left[w] > 0), None)
        if whole is not None:
            left[whole] -= 1
        elif all(left[h] > 0 for h in item.halves):
            for h in item.halves:
                left[h] -= 1
        else:
            missing[item.whole[0]] += 1
    return Verdict(expected=len(words), missing=missing, repeated=+left)
