"""A page's letters as its language writes them (``workers/engines/cpu/letters.py``): the rules
on hand-made recogniser outputs, with the languages' real alphabets (gflanguages)."""

from __future__ import annotations

import numpy as np

from workers.engines.cpu import letters

CHARS = ["blank", "i", "ı", "t", "ł", "u", "ů", "ü", "È", "É", " ", "s"]


def _row(steps: list[dict[str, float]]) -> np.ndarray:
    """Per-step probabilities: each step's named classes, the rest of its mass on nothing else."""
    row = np.zeros((len(steps), len(CHARS)), np.float32)
    for t, probs in enumerate(steps):
        for ch, p in probs.items():
            row[t, CHARS.index(ch)] = p
    return row


def test_runners_up_follow_greedy_ctc_decoding():
    # "s", blank, "i" held two steps (one character), " ", "t": runners-up at 20 % and 30 %.
    row = _row([{"s": 0.9}, {"blank": 0.9}, {"i": 0.7, "ı": 0.14}, {"i": 0.8}, {" ": 0.9}, {"t": 0.6, "ł": 0.18}])
    found = letters.runners_up(row, CHARS)
    assert [(r.position, r.chosen, r.letters) for r in found] == [(1, "i", (("ı", 0.2),)), (3, "t", (("ł", 0.3),))]


def test_a_space_nearly_written_between_two_letters_is_kept_with_the_letter_after_it():
    # "s", a gap where the space class reached 0.37 (the Polish "wolności|i"), "i": the evidence
    # goes with the "i"; a gap at 0.05 (inside a word) and a gap before a non-letter are not kept.
    row = _row([{"s": 0.9}, {"blank": 0.6, " ": 0.37}, {"i": 0.9}, {"blank": 0.9, " ": 0.05}, {"t": 0.9}])
    found = letters.runners_up(row, CHARS)
    assert [(r.position, r.chosen, r.letters, r.space_before) for r in found] == [(1, "i", (), 0.37)]
    # A letter with both a runner-up and a space before it: one entry holding both.
    row = _row([{"s": 0.9}, {"blank": 0.6, " ": 0.2}, {"t": 0.6, "ł": 0.18}])
    assert [(r.position, r.letters, r.space_before) for r in letters.runners_up(row, CHARS)] == [
        (1, (("ł", 0.3),), 0.2)
    ]


def test_a_runner_up_under_the_kept_share_is_not_kept():
    assert letters.runners_up(_row([{"i": 0.99, "ı": 0.01}]), CHARS) == ()


def test_turkish_prefers_its_dotless_i_only_where_the_recogniser_half_saw_it():
    turkish = letters.language_letters("tr")
    assert {"ı", "İ", "ş"} <= turkish.preferred and "i" in turkish.written
    runners = [letters.Runners(1, "i", (("ı", 0.4),)), letters.Runners(3, "i", (("ı", 0.05),))]
    assert letters.as_written("bir bir", runners, turkish) == "bır bir"


def test_polish_reads_its_l_with_stroke_and_english_is_left_alone():
    runners = [letters.Runners(0, "t", (("ł", 0.3),))]
    assert letters.as_written("tza", runners, letters.language_letters("pl")) == "łza"
    assert letters.as_written("tza", runners, letters.language_letters("en")) == "tza"


def test_a_letter_the_language_does_not_write_gives_way_to_one_it_does():
    # Czech writes ů, not ü (the recogniser read "národü"): its strongest runner-up the language
    # writes wins; one under RUNNER_UP_MIN does not.
    czech = letters.language_letters("cs")
    assert letters.as_written("národü", [letters.Runners(5, "ü", (("u", 0.05), ("ů", 0.2)))], czech) == "národů"
    assert letters.as_written("národü", [letters.Runners(5, "ü", (("ů", 0.05),))], czech) == "národü"


def test_a_letter_of_the_language_beyond_ascii_stays_as_read():
    # French writes È, though É is far commoner: PROCÈS-VERBAL must not become PROCÉS.
    runners = [letters.Runners(4, "È", (("É", 0.6),))]
    assert letters.as_written("PROCÈS", runners, letters.language_letters("fr")) == "PROCÈS"


def test_a_runner_up_for_another_reading_of_the_line_changes_nothing():
    runners = [letters.Runners(0, "t", (("ł", 0.3),))]
    assert letters.as_written("aza", runners, letters.language_letters("pl")) == "aza"
