"""The lexicon check (workers.engines.cpu.lexicon): a word its language does not use is spelled
again from the recogniser's own runners-up, against wordfreq's real word lists (in the wheel)."""

from __future__ import annotations

from workers.engines.cpu import lexicon
from workers.engines.cpu.letters import Runners


def _runner(text: str, position: int, *letters: tuple[str, float]) -> Runners:
    return Runners(position, text[position], tuple(letters))


def test_an_unknown_word_takes_the_runner_up_that_makes_it_a_word_of_its_language():
    # Read on the Polish Declaration: "ł" was the tiny recogniser's runner-up to "t", and both are
    # Polish letters, so only the vocabulary can choose.
    text = "Artykut 1. Wszyscy ludzie"
    assert lexicon.corrected(text, [_runner(text, 6, ("ł", 0.04), ("f", 0.03))], "pl") == "Artykuł 1. Wszyscy ludzie"


def test_two_letters_of_one_word_and_the_case_of_the_letter_replaced():
    text = "WOINOSCI i"
    runners = [_runner(text, 2, ("l", 0.3)), _runner(text, 5, ("ś", 0.05))]
    assert lexicon.corrected(text, runners, "pl") == "WOLNOŚCI i"


def test_a_word_the_language_uses_stays_as_read_whatever_the_runners_up():
    # "lidskych" is no Czech word, "lidských" is; but "také" read right must not become "taky",
    # though that is a Czech word too and the runner-up is strong.
    text = "také lidskych"
    runners = [_runner(text, 3, ("y", 0.5)), _runner(text, 10, ("ý", 0.2))]
    assert lexicon.zipf("taky", "cs") > 0
    assert lexicon.corrected(text, runners, "cs") == "také lidských"


def test_nothing_the_recogniser_did_not_offer_is_written():
    # "artykut" has no runner-up at its last letter: no spelling is invented.
    text = "artykut"
    assert lexicon.corrected(text, [_runner(text, 0, ("e", 0.5))], "pl") == "artykut"
    assert lexicon.corrected(text, [], "pl") == "artykut"


def test_names_codes_short_words_and_uncovered_languages_are_left_alone():
    text = "Zbyszko AB12CD tu"
    runners = [_runner(text, 0, ("S", 0.5)), _runner(text, 16, ("o", 0.9))]
    assert lexicon.corrected(text, runners, "pl") == text
    assert not lexicon.covers("xx") and not lexicon.covers("")
    assert lexicon.corrected("artykut", [_runner("artykut", 6, ("ł", 0.5))], "xx") == "artykut"


def test_the_fewest_changes_win():
    # One change makes a word: a two-change spelling is not looked for.
    text = "insanlik"
    runners = [_runner(text, 6, ("ı", 0.2)), _runner(text, 0, ("ı", 0.1))]
    assert lexicon.corrected(text, runners, "tr") == "insanlık"


# A second reading of the line (Tesseract's Latin model, recognizer._reread_unknown_words) taken
# word by word where the evidence says it is the better one (lexicon.merged), nowhere else. The
# lines are as read on the corpus's Declarations (bench/results/eval-2026-12-07.md).


def test_a_second_reading_replaces_a_misread_word_with_a_known_one_and_nothing_else():
    ours = "bulunduğu memleket veya üükenin siyasi, hükuki veya milletlerarası statüsü"
    theirs = "bulunduğu memleket veya ülkenin siyasi, hukuki veya milletlerarasi statüsü"
    # "milletlerarasi" is unknown (Tesseract dropped the dotless ı): the known word as read stays.
    assert lexicon.merged(ours, theirs, "tr") == (
        "bulunduğu memleket veya ülkenin siyasi, hukuki veya milletlerarası statüsü"
    )


def test_a_word_joined_by_one_reader_is_split_where_the_other_reads_two_known_words():
    assert lexicon.merged("mu zacházenínebo trestu", "mu zacházení nebo trestu", "cs") == "mu zacházení nebo trestu"


def test_a_word_too_rare_for_the_list_is_taken_only_where_our_runners_up_agree():
    # "bulunmalarına" is not in wordfreq's small Turkish list, nor is the misreading; the second
    # reading's ı was the recogniser's own runner-up to i there, so the two readers agree.
    ours = "beyan etmiş bulunmalarina,"
    theirs = "beyan etmiş bulunmalarına,"
    assert lexicon.zipf("bulunmalarına", "tr") == 0
    at = ours.index("bulunmalarina") + 10
    assert lexicon.merged(ours, theirs, "tr", [_runner(ours, at, ("ı", 0.05))]) == theirs
    # Without that runner-up, nothing says which reading is right: ours stays.
    assert lexicon.merged(ours, theirs, "tr", [_runner(ours, at - 3, ("e", 0.5))]) == ours


def test_a_mark_the_recogniser_read_is_taken_away_only_by_a_strong_runner_up():
    # The Polish Declaration at 150 dpi: "skończoną", ą read at 95 % and a at 5 %; the word is too
    # rare for the small list, "skończona" is in it. The mark is ink the recogniser saw.
    text = "nie skończoną jeszcze"
    assert lexicon.zipf("skończoną", "pl") == 0 < lexicon.zipf("skończona", "pl")
    at = text.index("ą")
    assert lexicon.corrected(text, [_runner(text, at, ("a", 0.05))], "pl") == text
    assert lexicon.corrected(text, [_runner(text, at, ("a", 0.2))], "pl") == "nie skończona jeszcze"
    # A mark English does not write is a speck as often as ink: a weak runner-up takes it away.
    scan = "my fathér said"
    assert lexicon.corrected(scan, [_runner(scan, scan.index("é"), ("e", 0.05))], "en") == "my father said"


def test_the_recognisers_first_choice_agrees_where_letters_wrote_its_runner_up():
    # The Polish Declaration (p2, 200 dpi): the recogniser read "pogwatceniem", o first and ó at 16 %;
    # ``letters`` wrote ó (a common Polish letter), so the line came to the lexicon "pógwatceniem".
    # Tesseract's Polish model reads "pogwałceniem" (too rare for the small list): its o is our first
    # choice, its ł our runner-up, so the two readers agree on both letters.
    ours, theirs = "będącą pógwatceniem niniejszej", "będącą pogwałceniem niniejszej"
    assert lexicon.zipf("pogwałceniem", "pl") == 0
    at = ours.index("pógwatceniem")
    first_choice = Runners(at + 1, "o", (("ó", 0.16),))
    assert lexicon.merged(ours, theirs, "pl", [first_choice, _runner(ours, at + 5, ("ł", 0.03))]) == theirs
    # Without the first choice nothing offered o there: ours stays.
    assert lexicon.merged(ours, theirs, "pl", [_runner(ours, at + 5, ("ł", 0.03))]) == ours


def test_a_letter_the_second_reading_writes_twice_is_taken_for_an_unknown_word():
    # Two like letters with no blank step between them are one letter to a CTC decoder: the Turkish
    # "fiillerden" read "fillerden". Tesseract's Turkish model writes the i twice.
    ours, theirs = "teşkil etmeyen fillerden dolayı", "teşkil etmeyen fiillerden dolayı"
    assert lexicon.zipf("fillerden", "tr") == 0
    assert lexicon.merged(ours, theirs, "tr") == theirs
    # Not a doubled letter (a letter added), nor one added to a word the language uses: ours stays.
    assert lexicon.merged(ours, "teşkil etmeyen fiallerden dolayı", "tr") == ours
    assert lexicon.merged("bu haklar", "bu haaklar", "tr") == "bu haklar"


def test_a_glyph_read_twice_as_two_letters_is_read_once_where_the_second_reading_agrees():
    # The Czech Declaration at 150 dpi: ý on one step, ó on the next, ó's runner-up ý at 91 %.
    ours, theirs = "a nezcizitelnýóch práv", "a nezcizitelných práv"
    at = ours.index("ó")
    runners = [_runner(ours, at - 1, ("ó", 0.21)), _runner(ours, at, ("ý", 0.91))]
    assert lexicon.merged(ours, theirs, "cs", runners) == theirs
    # Without that runner-up the extra letter may be the second reading's loss: ours stays.
    assert lexicon.merged(ours, theirs, "cs", runners[:1]) == ours


def test_a_word_the_second_reading_changed_is_changed_alike_where_it_was_not_read_again():
    # The Polish Declaration: "Artykut" under every article; the lines where the recogniser doubted
    # its t were read again ("Artykuł"), the two where it did not stayed.
    before = ["Artykut 2", "Artykut 5", "Każdy człowiek ma prawo", "Artykut 6"]
    after = [("Artykuł 2", 0.9), ("Artykut 5", 0.95), ("Każdy człowiek ma prawo", 0.97), ("Artykut 6", 0.96)]
    assert [text for text, _ in lexicon.as_elsewhere(before, after, "pl")] == [
        "Artykuł 2",
        "Artykuł 5",
        "Każdy człowiek ma prawo",
        "Artykuł 6",
    ]
    # A word changed two ways, or a word the language uses, is left where it was not read again.
    twice = [("Artykuł 2", 0.9), ("Artykul 3", 0.9), ("Artykut 5", 0.95)]
    assert lexicon.as_elsewhere(["Artykut 2", "Artykut 3", "Artykut 5"], twice, "pl")[2][0] == "Artykut 5"
    known = lexicon.as_elsewhere(["prawa 2", "prawa 5"], [("prawo 2", 0.9), ("prawa 5", 0.9)], "pl")
    assert known[1][0] == "prawa 5"


def test_an_ascii_letter_gives_way_to_a_common_letter_of_the_language_from_the_second_reading():
    ours, theirs = "w Paryżu, uchwalita 10 grudnia", "w Paryżu, uchwaliła 10 grudnia"
    assert lexicon.zipf("uchwaliła", "pl") == 0  # too rare for the small list
    assert lexicon.merged(ours, theirs, "pl", preferred=frozenset("ąćęłńóśźżĄĆĘŁŃÓŚŹŻ")) == theirs
    assert lexicon.merged(ours, theirs, "pl") == ours


def test_known_words_digits_and_whole_lines_are_never_traded():
    # Our words are all known: a different second reading changes nothing.
    assert lexicon.merged("Wszyscy ludzie rodzą się wolni", "Wszyscy ludzie rodza sie wolni", "pl") == (
        "Wszyscy ludzie rodzą się wolni"
    )
    # The misread word's run holds a number the second reading reads otherwise: left as read.
    assert lexicon.merged("artykut 12 praw", "artykuł 13 praw", "pl") == "artykut 12 praw"
    # Nothing to merge with.
    assert lexicon.merged("artykut", "", "pl") == "artykut"


def test_doubted_words_are_unknown_words_with_a_runner_up_in_them():
    text = "Beyannamesini tedbirlerie gerek"
    at = text.index("tedbirlerie") + 9
    assert lexicon.unknown_words(text, "tr") == ["Beyannamesini", "tedbirlerie"]
    assert lexicon.doubted_words(text, [_runner(text, at, ("l", 0.3))], "tr") == ["tedbirlerie"]
    assert lexicon.doubted_words(text, [], "tr") == []


def test_turkish_capital_i_without_its_dot_is_no_word():
    # In Turkish the capital of i is İ and I is ı's: "Insanlık" is the recogniser missing İ's dot,
    # and "İnsanlık" a word, where str.lower says the opposite ("insanlık"; "i̇nsanlık" with a
    # combining dot, no word).
    assert lexicon.lowered("Insanlık", "tr") == "ınsanlık" and lexicon.lowered("İnsanlık", "tr") == "insanlık"
    assert lexicon.unknown_words("Insanlık vicdanını", "tr") == ["Insanlık"]
    assert lexicon.unknown_words("İnsanlık vicdanını", "tr") == []
    assert lexicon.lowered("Insel", "de") == "insel"


def test_a_short_word_one_letter_off_a_far_commoner_one_is_read_as_that_word():
    # Read on camelot's Mexican towns table (bench corpus, every rendering): "El" as "EI", a capital
    # I with "l" the runner-up; "ei" is in wordfreq's Spanish list (Zipf 3.9), so only the margin
    # to "el" (7.5) tells them apart. The same on the UNLV magazine scan: "tme" for "the".
    text = "Centro de Arriba (EI Taray)"
    assert lexicon.zipf("ei", "es") > 0
    assert lexicon.corrected(text, [_runner(text, 19, ("l", 0.3))], "es") == "Centro de Arriba (El Taray)"
    text = "tme puppy"
    assert lexicon.corrected(text, [_runner(text, 1, ("h", 0.1))], "en") == "the puppy"


def test_a_short_word_is_kept_where_the_other_spelling_is_not_far_commoner_or_it_is_in_capitals():
    # Polish "tu" (here) and "to" (this) are both common: no margin, no change.
    text = "tu jest"
    assert lexicon.corrected(text, [_runner(text, 1, ("o", 0.9))], "pl") == text
    # A receipt's "SDN BHD" (a Malaysian company's suffix): in capitals a short word is an
    # abbreviation as often as a word, so "SON" is not written (nor "SoN"); and written "Sdn Bhd",
    # "Son" (Zipf 5.3) is not among the commonest words that would outweigh a name.
    text = "SDN BHD"
    assert lexicon.corrected(text, [_runner(text, 1, ("o", 0.5))], "en") == text
    text = "Guardian Health And Beauty Sdn Bhd"
    assert lexicon.corrected(text, [_runner(text, 28, ("o", 0.5))], "en") == text
    # The WARN report's "LLC dba Bakery": "dba" is in no list, but "cba" (Zipf 3.3) is no common word.
    text = "Bay Bread LLC dba Bakery"
    assert lexicon.corrected(text, [_runner(text, 14, ("c", 0.5), ("a", 0.3))], "en") == text


def _gap(text: str, position: int, share: float) -> Runners:
    return Runners(position, text[position], (), share)


def test_two_words_read_as_one_are_split_where_the_recogniser_nearly_wrote_the_space():
    # The Polish and Czech Declarations' second pages (bench corpus, 200 dpi): the space class
    # reached 0.37 and 0.15 in these gaps; every half is a word, neither joined form is.
    text = "życia, wolnościi bezpieczeństwa"
    runners = [_gap(text, 15, 0.37), _runner(text, 20, ("b", 0.1))]
    split, moved = lexicon.split(text, runners, "pl")
    assert split == "życia, wolności i bezpieczeństwa"
    # The runners-up after the cut move with their letters; the spent gap is dropped.
    assert [(r.position, split[r.position], r.space_before) for r in moved] == [(16, "i", 0.0), (21, "p", 0.0)]
    text = "zacházenínebo trestu."
    assert lexicon.split(text, [_gap(text, 9, 0.15)], "cs")[0] == "zacházení nebo trestu."


def test_no_split_without_the_gap_or_where_the_word_or_a_half_is_no_word():
    text = "wolnościi"
    assert lexicon.split(text, [], "pl")[0] == text
    # A known word is never split, whatever the gap ("nowhere" is a word, "no where" two).
    text = "nowhere"
    assert lexicon.split(text, [_gap(text, 2, 0.5)], "en")[0] == text
    # An unknown word whose halves are not both words stays (a name, a code).
    text = "Zbyszkowski"
    assert lexicon.split(text, [_gap(text, 3, 0.5)], "pl")[0] == text
    # A name in camel case is one word, though both halves are words (the UNLV scan's "MacWrite").
    text = "Apple's MacWrite, which"
    assert lexicon.split(text, [_gap(text, 11, 0.3)], "en")[0] == text
    # A one-letter half must be one of the language's commonest words: "x" is not.
    text = "taxx"
    assert lexicon.split(text, [_gap(text, 3, 0.5)], "en")[0] == text


def test_a_mark_the_recogniser_dropped_is_written_where_the_word_needs_it():
    # The Turkish Declaration (bench corpus): "İnsan" read without İ's dot, "tarafından" with a dot
    # on its ı; neither had the right letter among its runners-up (under 2 %). wordfreq's Turkish
    # list holds the spellings typed without marks ("tarafindan" at 3.9), so a known word takes the
    # mark only where that makes it a hundred times more used ("tarafından" 6.1; German "über" 6.4
    # for "uber" 4.1, but "Brücke", 4.6, is not common enough to outweigh an unlisted "Brucke").
    assert 0 < lexicon.zipf("tarafindan", "tr") < lexicon.zipf("tarafından", "tr") - lexicon.MARKED_MARGIN
    text = "Insan hakları tarafindan"
    assert lexicon.corrected(text, [], "tr") == "İnsan hakları tarafından"
    assert lexicon.corrected("Er ist uber die Brucke gegangen", [], "de") == "Er ist über die Brucke gegangen"


def test_no_mark_where_the_word_stands_as_read_is_in_capitals_or_the_language_writes_none():
    # Spanish "publico" (I publish) and "Mexico" are words whose marked twins are only a little
    # commoner; Polish "moze" likewise; a word in capitals often drops its accents on purpose.
    for text, language in [("publico Mexico numero", "es"), ("moze", "pl"), ("INSAN HAKLARI", "tr")]:
        assert lexicon.corrected(text, [], language) == text
    # The Czech Declaration's "jsou nadáni rozumem ... maje": too rare for the small list, right as
    # read, and their marked twins ("nadání", "máje") are not common enough to outweigh that.
    assert lexicon.zipf("maje", "cs") == lexicon.zipf("nadáni", "cs") == 0
    assert lexicon.corrected("jsou nadáni rozumem maje", [], "cs") == "jsou nadáni rozumem maje"
    # English has no common letters beyond ASCII: nothing is ever marked.
    assert lexicon.corrected("naive cafe resume", [], "en") == "naive cafe resume"
    # A mark comes only where the runners-up spell no word: "artykut" has no letter with a mark
    # that makes it Polish ("ł" is no "t" with a mark), so it stays.
    assert lexicon.corrected("artykut", [], "pl") == "artykut"


def test_the_recognisers_first_choice_is_an_option_where_letters_replaced_it():
    # ``letters`` wrote the runner-up "ó" for the recogniser's "o" (both Polish letters, "ó" at 10 %
    # or more), as on the Polish Declaration's "póstępowych"; "wólności" is no word, "wolności" is:
    # the recogniser's first choice comes back.
    runner = Runners(1, "o", (("ó", 0.3),))
    assert lexicon.zipf("wólności", "pl") == 0 < lexicon.zipf("wolności", "pl")
    assert lexicon.corrected("wólności", [runner], "pl") == "wolności"
