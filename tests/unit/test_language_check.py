"""The language check's decision (workers/engines/cpu/language.py) on the real identifier and
the real alphabet data (pycld2's and gflanguages' wheels), with recognisers' charsets written
out: which letters a page's language needs, and whether a recogniser lacking some is flagged."""

from __future__ import annotations

import string

from workers.engines.cpu import language

# What a Latin-only recogniser of the Latin-1 and Latin Extended-A/B blocks can write: no
# precomposed letters of Latin Extended Additional (ệ ở ạ ữ), no ə.
LATIN_1_AND_EXTENDED = frozenset(string.printable) | {
    chr(o) for o in range(0x00A0, 0x0250) if o != 0x01A1 and o != 0x01B0
}

VIETNAMESE = (
    "Mọi người sinh ra đều được tự do và bình đẳng về nhân phẩm và quyền lợi. Mọi con người đều "
    "được tạo hóa ban cho lý trí và lương tâm và cần phải đối xử với nhau trong tình anh em. "
) * 3
# The same read by a recogniser without the tone-marked letters: what the fast profile returns.
VIETNAMESE_AS_READ = (
    "Moi ngudi sinh ra deu dudc tu do và bình dang vè nhân phâm và quyèn lqi. Moi con ngudi déu "
    "dudc tao hóa ban cho lý trí và ludng tâm và càn phài dói xú vói nhau trong tình anh em. "
) * 3
FRENCH = (
    "Tous les êtres humains naissent libres et égaux en dignité et en droits. Ils sont doués de "
    "raison et de conscience et doivent agir les uns envers les autres dans un esprit de fraternité. "
) * 3


def test_a_language_whose_letters_the_recogniser_lacks_is_flagged():
    found = language.check(VIETNAMESE_AS_READ, LATIN_1_AND_EXTENDED)
    assert found.language == "vi" and found.sure
    assert "ệ" in found.missing and "ơ" in found.missing
    assert found.missing_share >= language.MISSING_SHARE
    assert found.flags == (language.FLAG_LANGUAGE_UNSUPPORTED,)


def test_a_recogniser_that_has_the_letters_is_not_flagged():
    everything = LATIN_1_AND_EXTENDED | set(VIETNAMESE) | {chr(o) for o in range(0x1E00, 0x1F00)} | {"ơ", "ư"}
    found = language.check(VIETNAMESE, frozenset(everything))
    assert found.language == "vi" and found.missing == "" and found.flags == ()


def test_a_language_whose_letters_are_all_there_is_not_flagged():
    found = language.check(FRENCH, LATIN_1_AND_EXTENDED)
    assert (found.language, found.missing, found.flags) == ("fr", "", ())


def test_short_or_unsure_readings_are_not_judged():
    assert language.check("Mọi người sinh ra đều", LATIN_1_AND_EXTENDED) == language.LanguageCheck("", False)
    assert language.identify("\x00\ud800 " * 300) == ("un", False)  # what CLD2 refuses is not judged
    vietnamese = language.alphabet("vi")
    assert language.judge("vi", False, LATIN_1_AND_EXTENDED, vietnamese).flags == ()  # unsure identification
    assert language.judge("xx", True, LATIN_1_AND_EXTENDED, None).flags == ()  # no data on the language


def test_a_rarely_written_missing_letter_does_not_flag():
    """Welsh's base letters include ẁ ẃ ẅ ỳ, which its text seldom uses: missing, not needed."""
    welsh = language.alphabet("cy")
    found = language.judge("cy", True, LATIN_1_AND_EXTENDED, welsh)
    assert "ẁ" in found.missing and found.missing_share < language.MISSING_SHARE and found.flags == ()


def test_alphabet_keeps_lowercase_single_letters():
    dutch = language.alphabet("nl")
    assert dutch is not None and {"a", "é", "ë"} <= dutch.letters
    assert all(len(ch) == 1 and ch.islower() for ch in dutch.letters)
    assert language.alphabet("xx") is None
