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

A two- or three-letter word is judged by use, not by presence (the short lists hold most letter
pairs): one letter changed, to a common word (``SHORT_MIN_ZIPF``) a thousand times more used than
the word as read (``SHORT_MARGIN``), written in lower case or capitalised: Spanish "EI" becomes
"El", Polish "tu" stays beside "to", a receipt's "SDN" stays.

Nothing is read again, and the letters written are the recogniser's runners-up, its own first
choice where ``letters`` replaced it, or, where those spell no word, a mark the recogniser
dropped (``_marked``): a letter of a word of four letters or more, in lower case or capitalised,
becomes one of the language's common letters that is the same letter with a mark, where that
makes a word a hundred times more used than the word as read (``MARKED_MARGIN``; Turkish "Insan"
→ "İnsan", "tarafindan" → "tarafından": the dot is a few pixels, the tiny recogniser offered
``İ`` and ``ı`` under 2 %, and wordfreq lists the spellings typed without marks too). A mark of
the language's own that the recogniser read itself is taken away only by a strong runner-up
(``letters.RUNNER_UP_MIN``): it saw the ink, and the word may be too rare for the list ("skończoną").
Names, codes and numbers stay as read unless one of those makes a known word.

What that leaves (a doubled letter, a right letter under 2 %, a word too rare for the small list)
the recogniser may have read again by Tesseract's model of the language
(``recognizer._reread_unknown_words``, the lines holding ``doubted_words``); ``merged`` decides,
word by word, where that second reading is taken, and ``as_elsewhere`` makes the same change to
the same misread word on the page's lines that were not read again.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from collections.abc import Callable, Sequence

from workers.engines.cpu.letters import RUNNER_UP_MIN, Runners, language_letters

# wordfreq's list: the words used at least once in a million (Zipf 3 and above; others read 0).
WORDLIST = "small"
# At most this many letters of one word are changed.
MAX_CHANGES = 2
# Words shorter than this are judged by the short-word rule below, not by the list alone: too many
# short words are known in every language (Spanish "ei" is in its list, at Zipf 3.9).
MIN_LETTERS = 4
# A two- or three-letter word is one of the language's commonest words far more often than a rare
# one, and its commonest misreads are one letter off ("ei" for Spanish "el", "tme" for "the"): one
# letter is changed, to a runner-up, and only where that makes a word used at least SHORT_MARGIN
# Zipf more (a thousand times) than the word as read and at least SHORT_MIN_ZIPF (about a
# language's thousand commonest words: "Mav" is "May", at 6.0; "Sdn" of "Sdn Bhd" is in no list,
# but English "son", at 5.3, is no reason to write it). The word written must
# be in lower case or capitalised: the runner-up is offered as the recogniser read it as well as in
# the case of the letter it replaces ("EI" is "El", its "I" the capital of no "l"), and a short
# word in capitals is an abbreviation as often as a word (a receipt's "SDN" stays, not "SON").
SHORT_MIN_LETTERS = 2
SHORT_MARGIN = 3.0
SHORT_MIN_ZIPF = 5.5
# A word of four letters or more takes a mark the recogniser may have dropped (``_marked``) only
# where that makes it a word used this much more (2 Zipf: a hundred times) than the word as read,
# which counts as at least LISTED_ZIPF (the small list's floor) when the list lacks it. The lists
# hold the spellings people type without the marks (Turkish "tarafindan" at 3.9 beside
# "tarafından" at 6.1, German "uber" 4.1 beside "über" 6.4), but also words in their own right
# whose marked twin is only a little commoner (Spanish "publico" 4.1 / "público" 5.3, "Mexico"
# 4.4 / "México" 5.5, Polish "moze" 5.0 / "może" 6.4: kept as read); and a word too rare for the
# list may be right as read (the Czech Declaration's "maje" and "nadáni", not "máje", 3.4, and
# "nadání", 3.7). Words in capitals are left as read: many languages drop accents on capitals.
MARKED_MARGIN = 2.0
LISTED_ZIPF = 3.0
_WORD = re.compile(r"[^\W\d_]+")


@functools.cache
def covers(language: str) -> bool:
    """Whether wordfreq has a word list for ``language`` (a CLD2 code such as ``pl``)."""
    from wordfreq import available_languages

    return language in available_languages(WORDLIST)


# Languages whose dotless ı is a letter of its own: there the capital I is ı's, and İ is i's.
DOTTED_I_LANGUAGES = frozenset({"tr", "az"})
_DOTTED_I = str.maketrans({"I": "ı", "İ": "i"})


def lowered(word: str, language: str) -> str:
    """``word`` in lower case as ``language`` writes it: in Turkish "Insanlık" is "ınsanlık", no
    word, where ``str.lower`` makes it "insanlık" and hides that the recogniser missed İ's dot
    (and makes the right "İnsanlık" "i̇nsanlık", with a combining dot: no word either)."""
    return (word.translate(_DOTTED_I) if language in DOTTED_I_LANGUAGES else word).lower()


@functools.lru_cache(maxsize=65536)
def zipf(word: str, language: str) -> float:
    from wordfreq import zipf_frequency

    return zipf_frequency(word, language, wordlist=WORDLIST)


def corrected(text: str, runners: Sequence[Runners], language: str) -> str:
    """``text`` with each unknown word replaced by the most used known word its runners-up spell,
    or a mark the recogniser dropped (see the module doc); ``text`` itself where none does or
    ``language`` is not covered."""
    if not covers(language):
        return text
    by_position = {r.position: r for r in runners}
    marks = _marked(language)
    known = language_letters(language)
    own = known.written if known is not None else frozenset()
    chars = list(text)
    for match in _WORD.finditer(text):
        start, end = match.span()
        word = match.group()
        if end - start < SHORT_MIN_LETTERS:
            continue
        short = end - start < MIN_LETTERS
        read = zipf(lowered(word, language), language)
        if short:
            options = [
                (i, _offered(by_position[i], text[i], own, as_read=True)) for i in range(start, end) if i in by_position
            ]
            above = max(read + SHORT_MARGIN, SHORT_MIN_ZIPF)
            best = _best_spelling(word, start, options, language, changes=1, above=above, shapes=_word_shape)
        else:
            best = None
            if read <= 0:
                options = [
                    (i, _offered(by_position[i], text[i], own, as_read=False))
                    for i in range(start, end)
                    if i in by_position
                ]
                best = _best_spelling(word, start, options, language)
            if best is None:  # a mark the recogniser dropped? (a word as read counts as listed)
                dropped = [(i, marks[text[i]]) for i in range(start, end) if text[i] in marks]
                above = max(read, LISTED_ZIPF) + MARKED_MARGIN
                # A listed word is one mark from its other spelling ("tarafindan"): one change is
                # looked for, one lookup a markable letter (~8 µs each, cached; 0.045 CPU-s for a
                # Declaration's 352 words from a cold cache).
                changes = 1 if read > 0 else MAX_CHANGES
                best = _best_spelling(word, start, dropped, language, changes=changes, above=above, shapes=_word_shape)
        if best is not None:
            chars[start:end] = best
    return "".join(chars)


def split(text: str, runners: Sequence[Runners], language: str) -> tuple[str, tuple[Runners, ...]]:
    """``text`` with each word the language does not use split in two where the recogniser nearly
    wrote a space (``Runners.space_before``, at least ``letters.SPACE_KEPT_MIN``) and both halves
    are words of the language (a one-letter half one of its commonest, ``SHORT_MIN_ZIPF``):
    "wolnościi" is "wolności i", "zacházenínebo" "zacházení nebo", a receipt's "SALTEDEGG" "SALTED
    EGG"; not between a small letter and a capital ("MacWrite"). Where several gaps would do, the
    split whose rarer half is the more used. ``runners`` come back at their new positions."""
    gaps = {r.position: r.space_before for r in runners if r.space_before > 0}
    if not gaps or not covers(language):
        return text, tuple(runners)
    cuts: list[int] = []
    for match in _WORD.finditer(text):
        start, end = match.span()
        if zipf(lowered(match.group(), language), language) > 0:
            continue
        best, best_zipf = None, 0.0
        for cut in range(start + 1, end):
            if cut not in gaps or (text[cut - 1].islower() and text[cut].isupper()):
                continue  # no gap; or a name in camel case ("MacWrite", "PowerPoint"), one word
            halves = [zipf(lowered(text[a:b], language), language) for a, b in ((start, cut), (cut, end))]
            short = [b - a == 1 for a, b in ((start, cut), (cut, end))]
            if any(z < SHORT_MIN_ZIPF if one else z <= 0 for z, one in zip(halves, short, strict=True)):
                continue
            if min(halves) > best_zipf:
                best, best_zipf = cut, min(halves)
        if best is not None:
            cuts.append(best)
    if not cuts:
        return text, tuple(runners)
    pieces, last = [], 0
    for cut in cuts:
        pieces += [text[last:cut], " "]
        last = cut
    pieces.append(text[last:])

    def moved(position: int) -> int:
        return position + sum(1 for cut in cuts if cut <= position)

    return "".join(pieces), tuple(
        Runners(moved(r.position), r.chosen, r.letters, 0.0 if r.position in cuts else r.space_before) for r in runners
    )


def _best_spelling(
    word: str,
    start: int,
    options: list[tuple[int, tuple[str, ...]]],
    language: str,
    *,
    changes: int = MAX_CHANGES,
    above: float = 0.0,
    shapes: Callable[[str], bool] | None = None,
) -> str | None:
    """The most used word (Zipf over ``above``) spelled by changing the fewest of ``word``'s letters,
    at most ``changes``, each to one of its ``options``, and written as ``shapes`` allows (a
    predicate on the word; None: any); None where none is."""
    best, best_zipf = None, above
    for k in range(1, changes + 1):
        for chosen in itertools.combinations(options, k):
            for letters in itertools.product(*(alternatives for _i, alternatives in chosen)):
                spelled = list(word)
                for (i, _alternatives), letter in zip(chosen, letters, strict=True):
                    spelled[i - start] = letter
                candidate = "".join(spelled)
                if shapes is not None and not shapes(candidate):
                    continue
                found = zipf(lowered(candidate, language), language)
                if found > best_zipf:
                    best, best_zipf = candidate, found
        if best is not None:
            return best  # fewest changes first: a one-letter fix beats a more used two-letter one
    return None


def _offered(runners: Runners, read: str, own: frozenset[str], *, as_read: bool) -> tuple[str, ...]:
    """A letter's runners-up in the case of the letter they would replace, and, ``as_read``, also
    as the recogniser offered them; and the recogniser's own first choice where ``letters`` wrote
    another (Czech "příznána": ``letters`` took the runner-up ``í`` for the ``i`` of "přiznána")."""
    # A marked letter of the language's own (``own``) that the recogniser read itself is ink it saw:
    # its unmarked runner-up must be a strong one (``letters.RUNNER_UP_MIN``) to take the mark away
    # (the Polish "skończoną", ą read at 95 %, is too rare for the small list, "skończona" is in
    # it). A mark the language does not write is a speck as often (an English scan's "fathér").
    seen = _bases(read) if read == runners.chosen and not read.isascii() and read in own else frozenset()
    strong = [ch for ch, share in runners.letters if share >= RUNNER_UP_MIN or _in_case(ch, read) not in seen]
    cased = tuple(_in_case(ch, read) for ch in strong)
    first = (runners.chosen,) if runners.chosen != read else ()
    if not as_read:
        return tuple(dict.fromkeys(cased + first))
    return tuple(dict.fromkeys(cased + tuple(strong) + first))


# Letters that are another letter with a mark but that Unicode does not decompose.
_UNDECOMPOSED = {"ı": "i", "ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ħ": "h", "Ħ": "H"}


@functools.cache
def _marked(language: str) -> dict[str, tuple[str, ...]]:
    """For each letter, the language's common letters beyond ASCII (``letters.language_letters``'s
    ``preferred``) that are that letter with a mark more: Turkish ``I`` → ``İ``, ``i`` → ``ı``;
    Vietnamese ``ê`` → ``ế``, ``ề``...; none for a language whose alphabet is unknown."""
    known = language_letters(language)
    if known is None:
        return {}
    found: dict[str, list[str]] = {}
    for letter in sorted(known.preferred):
        for base in _bases(letter):
            found.setdefault(base, []).append(letter)
    return {base: tuple(marked) for base, marked in found.items()}


@functools.cache
def _bases(letter: str) -> frozenset[str]:
    """The letters ``letter`` is with one or more marks more (``ế``: ``e``, ``ê``; ``ł``: ``l``)."""
    parts = unicodedata.normalize("NFD", letter)
    bases = {unicodedata.normalize("NFC", parts[:k]) for k in range(1, len(parts))}
    return frozenset(bases | ({_UNDECOMPOSED[letter]} if letter in _UNDECOMPOSED else set()))


def _word_shape(word: str) -> bool:
    """A short word as a word is written: in lower case or capitalised."""
    return word.islower() or word.istitle()


def _in_case(letter: str, read: str) -> str:
    """A runner-up in the case of the letter it would replace (the recogniser's classes have both)."""
    if read.isupper() and len(letter.upper()) == 1:
        return letter.upper()
    return letter.lower() if read.islower() else letter


# A word of fewer letters is not judged by ``unknown_words`` and ``merged``: one- and two-letter
# words are abbreviations, initials and numerals as often as words.
CHECKED_MIN_LETTERS = 3
_TOKEN_DIGITS = re.compile(r"\d")


def unknown_words(text: str, language: str) -> list[str]:
    """The words of ``text`` (``CHECKED_MIN_LETTERS`` letters or more) that ``language``'s list lacks."""
    return [
        word
        for word in _WORD.findall(text)
        if len(word) >= CHECKED_MIN_LETTERS and zipf(lowered(word, language), language) == 0
    ]


def doubted_words(text: str, runners: Sequence[Runners], language: str) -> list[str]:
    """The unknown words of ``text`` (``unknown_words``) of which the recogniser doubted a letter:
    one of their letters had a runner-up (``runners``, positions in ``text``). A word read with
    no doubt at all is a rare word of the language more often than a misreading (a Turkish
    Declaration's "Beyannamesini": most of its lines hold one), and is not read again."""
    doubted = {r.position for r in runners}
    return [
        m.group()
        for m in _WORD.finditer(text)
        if len(m.group()) >= CHECKED_MIN_LETTERS
        and zipf(lowered(m.group(), language), language) == 0
        and any(i in doubted for i in range(*m.span()))
    ]


def _standing(tokens: Sequence[str], language: str) -> int:
    """How well a run of tokens reads in ``language``: its known words less its unknown ones."""
    words = [w for token in tokens for w in _WORD.findall(token) if len(w) >= CHECKED_MIN_LETTERS]
    return sum(1 if zipf(lowered(w, language), language) > 0 else -1 for w in words)


def merged(
    ours: str, theirs: str, language: str, runners: Sequence[Runners] = (), preferred: frozenset[str] = frozenset()
) -> str:
    """``ours`` with words taken from ``theirs`` (another recogniser's reading of the same line)
    where the evidence says they are the better reading, and only there:

    - a run of words holding a word ``language`` does not use, where the same place's run in
      ``theirs`` reads better in the language (``_standing``: a misread word for a known one, a
      word split or joined) and holds the same digits;
    - a word ``language``'s list does not know, where ``theirs`` spells it differently only in
      letters that were our recogniser's own runners-up there (``runners``, positions in
      ``ours``: the two readers agree on each letter changed, as on the Turkish "bulunmalarına",
      too rare for the list, read "bulunmalarina" with ı a runner-up of i; the recogniser's first
      choice counts where ``letters`` wrote a runner-up instead), or that are the
      language's own common letters beyond ASCII (``preferred``, ``letters.LanguageLetters``)
      where ours read an ASCII letter (the Polish "uchwaliła" read "uchwalita"); or only by a
      letter ``theirs`` writes twice where ours wrote it once (``_doubled``: a CTC recogniser
      writes two like letters as one when no blank step parts them; Turkish "fiilen"), or by a
      letter of ours that ``theirs`` lacks and that our recogniser nearly read as its neighbour
      (``_stuttered``: one glyph read twice; Czech "nezcizitelnýóch").

    Runs are matched by their words as written (``difflib``), so a word split or joined
    differently still lines up; nothing else of ``ours`` changes."""
    import difflib

    spans = [(m.start(), m.group()) for m in re.finditer(r"\S+", ours)]
    other = theirs.split()
    if not spans or not other:
        return ours
    mine = [token for _start, token in spans]
    offered: dict[int, set[str]] = {}
    for r in runners:
        # The recogniser's own first choice counts as offered where ``letters`` wrote a runner-up
        # instead: the Polish "postępowych" read so, made "póstępowych" by ó's 15 %.
        offered.setdefault(r.position, set()).update(lowered(ch, language) for ch in (r.chosen, *dict(r.letters)))
    out: list[str] = []
    changed = False
    matcher = difflib.SequenceMatcher(a=mine, b=other, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        run, instead = mine[a0:a1], other[b0:b1]
        if op != "replace" or not unknown_words(" ".join(run), language):
            out.extend(run)
        elif _standing(instead, language) > _standing(run, language) and _same_digits(run, instead):
            out.extend(instead)
            changed = True
        elif len(run) == len(instead):
            for k, (token, alternative) in enumerate(zip(run, instead, strict=True)):
                agreed = unknown_words(token, language) and _agrees(
                    token, alternative, spans[a0 + k][0], offered, preferred, language
                )
                out.append(alternative if agreed else token)
                changed |= bool(agreed)
        else:
            out.extend(run)
    return " ".join(out) if changed else ours


def as_elsewhere(before: Sequence[str], after: Sequence[tuple[str, float]], language: str) -> list[tuple[str, float]]:
    """``after`` (a page's lines once ``merged``; ``before``: the same lines before the second
    reading) with each word the language does not use that the second reading changed on one line
    changed the same way on the lines where it stayed: the same word in the same print is the same
    misreading. The Polish Declaration's "Artykuł" read "Artykut" under every article: where the
    recogniser doubted its t, Tesseract's Polish model read it again ("Artykuł"); under two articles
    it did not doubt, and they stayed. Only words read one way everywhere they changed."""
    changes: dict[str, set[str]] = {}
    for old, (new, _score) in zip(before, after, strict=True):
        if old == new:
            continue
        old_tokens, new_tokens = old.split(), new.split()
        if len(old_tokens) != len(new_tokens):
            continue
        for a, b in zip(old_tokens, new_tokens, strict=True):
            words_a, words_b = _WORD.findall(a), _WORD.findall(b)
            if a == b or len(words_a) != len(words_b):
                continue
            for wa, wb in zip(words_a, words_b, strict=True):
                if wa != wb and len(wa) >= MIN_LETTERS and zipf(lowered(wa, language), language) == 0:
                    changes.setdefault(wa, set()).add(wb)
    same = {word: next(iter(to)) for word, to in changes.items() if len(to) == 1}
    if not same:
        return list(after)
    return [
        (_WORD.sub(lambda m: same.get(m.group(), m.group()), text), score) if old == text else (text, score)
        for old, (text, score) in zip(before, after, strict=True)
    ]


def _same_digits(run: Sequence[str], instead: Sequence[str]) -> bool:
    return _TOKEN_DIGITS.findall(" ".join(run)) == _TOKEN_DIGITS.findall(" ".join(instead))


def _first_difference(shorter: str, longer: str) -> int:
    """Where ``longer`` first differs from ``shorter`` (``len(shorter)`` where it only goes on)."""
    return next((i for i, (a, b) in enumerate(zip(shorter, longer, strict=False)) if a != b), len(shorter))


def _doubled(token: str, alternative: str) -> bool:
    """Whether ``alternative`` is ``token`` with one of its letters written twice: where a CTC
    recogniser's steps for two like letters hold no blank between them, it writes one (the Turkish
    "fiillerden", "gayriinsani" read "fillerden", "gayrinsani")."""
    if len(alternative) != len(token) + 1:
        return False
    k = _first_difference(token, alternative)
    return (
        k > 0
        and alternative[k] == alternative[k - 1]
        and alternative[k].isalpha()
        and alternative[k + 1 :] == token[k:]
    )


def _stuttered(token: str, alternative: str, start: int, offered: dict[int, set[str]], language: str) -> bool:
    """Whether ``alternative`` is ``token`` less one letter that our recogniser offered, as its
    runner-up, the letter beside it: one glyph read on two steps as two classes, which CTC does
    not merge (the Czech "nezcizitelných" read "nezcizitelnýóch", ó's runner-up ý at 91 %)."""
    if len(alternative) != len(token) - 1:
        return False
    k = _first_difference(alternative, token)
    if token[:k] + token[k + 1 :] != alternative or not token[k].isalpha():
        return False
    here = offered.get(start + k, set())
    beside = {token[j] for j in (k - 1, k + 1) if 0 <= j < len(token) and token[j] != token[k]}
    return any(lowered(ch, language) in here for ch in beside)


def _agrees(
    token: str, alternative: str, start: int, offered: dict[int, set[str]], preferred: frozenset[str], language: str
) -> bool:
    """Whether ``alternative`` differs from ``token`` (at ``start`` in the line) only in letters
    our recogniser offered as runners-up at those places (``offered``) or, for an ASCII letter of
    ours, in the language's common letters beyond ASCII (``preferred``); or only by a letter
    written twice that we wrote once (``_doubled``), or one we wrote twice as two letters
    (``_stuttered``)."""
    if _doubled(token, alternative) or _stuttered(token, alternative, start, offered, language):
        return True
    if len(alternative) != len(token) or alternative == token:
        return False
    return all(
        a == b
        or (b.isalpha() and lowered(b, language) in offered.get(start + k, ()))
        or (a.isascii() and b in preferred)
        for k, (a, b) in enumerate(zip(token, alternative, strict=True))
    )
