"""How the evaluation corpus scores a reading (bench/evaluation/scoring.py): what is folded, what counts."""

from __future__ import annotations

import pytest

from bench.evaluation import scoring


def test_word_f1_folds_case_width_and_edge_punctuation():
    s = scoring.word_f1("TOTAL: RM 12.50,", "Total rm 12.50", "latin")
    assert s.f1 == 1.0


def test_word_f1_keeps_inner_punctuation_and_diacritics():
    assert scoring.word_f1("ile", "île", "latin-diacritics").f1 == 0.0
    assert scoring.word_f1("e-mail", "email", "latin").f1 == 0.0


def test_hebrew_points_are_not_scored():
    pointed, plain = "בְּרֵאשִׁית בָּרָא", "בראשית ברא"
    assert scoring.word_f1(plain, pointed, "hebrew").f1 == 1.0
    # Other scripts keep their combining marks: a Devanagari vowel sign is part of the letter.
    assert scoring.word_f1("रज", "राज", "devanagari").f1 == 0.0


def test_character_f1_for_cjk_ignores_spaces_punctuation_and_full_width_forms():
    s = scoring.char_f1("人人生而自由, 在尊严", "人人生而自由，在尊严。", "chinese")
    assert s.f1 == 1.0
    assert scoring.char_f1("ＡＢＣ", "abc", "japanese").f1 == 1.0


def test_latin_or_symbols_for_cjk_score_near_zero():
    assert scoring.char_f1("Ll ∑ ∂ 0O", "人人生而自由", "chinese").f1 == 0.0


@pytest.mark.parametrize(
    ("script", "measure"), [("chinese", "char"), ("japanese", "char"), ("korean", "word"), ("latin", "word")]
)
def test_primary_measure(script, measure):
    assert scoring.primary_measure(script) == measure
    record = scoring.score("x", "x", script)
    assert record["measure"] == measure and record["f1"] == 1.0


def test_empty_reading_scores_zero_and_empty_both_one():
    assert scoring.word_f1("", "some words", "latin").f1 == 0.0
    assert scoring.word_f1("", "", "latin").f1 == 1.0
