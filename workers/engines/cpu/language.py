"""Whether the recogniser that read a page has the letters the page's language is written in,
judged from what the page read.

A page in a Latin-script language whose letters the recogniser lacks reads with confidence and
is wrong: the Vietnamese Declaration comes back from the fast profile as confident Latin without
most of its tone marks (ệ ở ạ ữ … are in neither PP-OCRv6 dictionary), so neither the script
check (``workers.engines.cpu.script``) nor the page's confidence says anything. The check:

1. **Which language** the page's reading is in: Google's Compact Language Detector 2 (``pycld2``,
   Apache-2.0; its tables are compiled into the extension, nothing is downloaded; 160-odd
   languages) on the text read with confidence, once the page holds ``MIN_LETTERS`` letters
   (fewer say little about a language). Only a sure answer counts: CLD2 calls it reliable and
   gives the language ``SURE_PERCENT`` of the text; a receipt or a table of numbers is left
   alone. A reading missing its diacritics still says its language (the Vietnamese page: ``vi``,
   reliable, 99%).
2. **Which letters that language needs**: its exemplar characters in the page's script
   (``gflanguages``, Google Fonts' language data, Apache-2.0, mostly from Unicode CLDR; the
   ``base`` set), lowercase single code points only (a sequence such as Dutch ``ij`` is read
   letter by letter; a case form is the same letter).
3. **Whether they matter**: some base letters are rare (Welsh ẁ ẃ ẅ ỳ), so a missing letter
   counts by how often it is written: the share of the letters of the language's sample text
   (the same data's; mostly the Declaration) that the recogniser cannot write. At
   ``MISSING_SHARE`` or more the page is flagged ``PageFlag.LANGUAGE_UNSUPPORTED``: its text is
   kept (most of it is right), and the flag says letters are missing from it. A language with no
   sample text counts any missing letter.

Generic: no language is named here. The detector is imported on the first page that needs it (a
few MB of read-only tables, shared by forked workers); a page costs a fraction of a millisecond
(docs/benchmarks.md, "Language check").
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from ocrsite.vocabulary import PageFlag

FLAG_LANGUAGE_UNSUPPORTED = str(PageFlag.LANGUAGE_UNSUPPORTED)

# The fewest letters a page's confident reading must hold before its language is identified.
MIN_LETTERS = 200
# The share of the text (percent) CLD2 must give its top language, reliably, for the answer to count.
SURE_PERCENT = 80
# The share of a language's written letters (its sample text) the recogniser must be unable to
# write before a page in that language is flagged: one letter in a hundred.
MISSING_SHARE = 0.01
# The page's script as gflanguages names it (ISO 15924): the check runs on Latin-read pages.
SCRIPT_LATN = "Latn"


@dataclass(frozen=True)
class LanguageCheck:
    language: str  # the detector's answer ("" when the page was too short to ask, "un" unknown)
    sure: bool  # reliable, and the language of SURE_PERCENT of the text
    missing: str = ""  # the letters the language needs that the recogniser cannot write
    missing_share: float = 0.0  # how much of the language's text those letters are

    @property
    def unsupported(self) -> bool:
        return self.sure and bool(self.missing) and self.missing_share >= MISSING_SHARE

    @property
    def flags(self) -> tuple[str, ...]:
        return (FLAG_LANGUAGE_UNSUPPORTED,) if self.unsupported else ()


@dataclass(frozen=True)
class Alphabet:
    letters: frozenset[str]  # lowercase, single code points (NFC)
    sample: str  # lowercase NFC text in the language ("" when the data has none)


def letter_count(text: str) -> int:
    return sum(ch.isalpha() for ch in text)


def needs_check(text: str) -> bool:
    """Whether a page's reading holds enough letters to identify its language."""
    return letter_count(text) >= MIN_LETTERS


def identify(text: str) -> tuple[str, bool]:
    """(language code, whether the answer is sure) of ``text``."""
    import pycld2

    # CLD2 refuses control characters and lone surrogates (invalid UTF-8): they say nothing of a language.
    clean = "".join(ch for ch in text if ch.isprintable() or ch == "\n")
    try:
        reliable, _bytes, details = pycld2.detect(clean)
    except pycld2.error:
        return "un", False
    code, percent = details[0][1], details[0][2]
    return str(code), bool(reliable) and percent >= SURE_PERCENT


@functools.cache
def alphabet(language: str, script: str = SCRIPT_LATN) -> Alphabet | None:
    """The letters ``language`` is written with in ``script`` and a sample of its text, from
    gflanguages' data (one file read); None when the data has no such language."""
    from importlib.resources import files

    from gfmetadata import LanguageProto, text_format

    path = files("gflanguages.data").joinpath("languages").joinpath(f"{language}_{script}.textproto")
    if not path.is_file():
        return None
    proto = text_format.Parse(path.read_text(encoding="utf-8"), LanguageProto())
    letters = {unicodedata.normalize("NFC", entry) for entry in proto.exemplar_chars.base.split()}
    sample = " ".join(str(value) for _field, value in proto.sample_text.ListFields())
    return Alphabet(
        frozenset(ch for ch in letters if len(ch) == 1 and ch.isalpha() and ch.islower()),
        unicodedata.normalize("NFC", sample).lower(),
    )


def judge(language: str, sure: bool, charset: frozenset[str] | set[str], found: Alphabet | None) -> LanguageCheck:
    """The check on an identified ``language`` (``sure``: the detector's answer counts; ``found``:
    its alphabet, None when unknown) for a recogniser that can write ``charset``."""
    if found is None or not sure:
        return LanguageCheck(language, sure)
    missing = found.letters - charset
    letters = [ch for ch in found.sample if ch.isalpha()]
    share = sum(ch in missing for ch in letters) / len(letters) if letters else (1.0 if missing else 0.0)
    return LanguageCheck(language, sure, "".join(sorted(missing)), round(share, 4))


def check(text: str, charset: frozenset[str] | set[str], script: str = SCRIPT_LATN) -> LanguageCheck:
    """Identify the language of a page's reading ``text`` and judge whether ``charset`` (what the
    recognisers that read it can write) holds its letters. A page too short to say is not judged."""
    if not needs_check(text):
        return LanguageCheck("", False)
    language, sure = identify(text)
    return judge(language, sure, charset, alphabet(language, script) if sure else None)


def charset_of(dictionaries: Iterable[Iterable[str]]) -> frozenset[str]:
    """Every single character the recognisers' dictionaries can write."""
    return frozenset(entry for dictionary in dictionaries for entry in dictionary if len(entry) == 1)
