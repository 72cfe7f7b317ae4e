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
