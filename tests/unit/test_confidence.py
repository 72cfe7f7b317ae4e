"""A page's confidence (workers/content/confidence.py): the character-weighted mean of its
regions', and the ocr:low-confidence flag judged on it."""

from __future__ import annotations

from ocrsite.vocabulary import PageFlag
from workers.content.confidence import page_confidence, with_confidence_flag

LOW = str(PageFlag.OCR_LOW_CONFIDENCE)


def test_confidence_is_weighted_by_characters():
    # A confident heading does not hide a paragraph of garbage.
    assert page_confidence([("Title", 1.0), ("x" * 95, 0.5)]) == 0.525


def test_regions_without_text_or_confidence_do_not_count():
    assert page_confidence([("", 0.1), ("picture", None), ("read", 0.9)]) == 0.9
    assert page_confidence([("", None)]) is None
    assert page_confidence([]) is None


def test_flag_added_under_the_threshold_and_taken_away_above_it():
    unsure = str(PageFlag.ORIENTATION_UNSURE)
    assert with_confidence_flag([unsure], 0.6, 0.85) == [unsure, LOW]
    assert with_confidence_flag([unsure, LOW], 0.95, 0.85) == [unsure]  # a page read again
    assert with_confidence_flag([LOW], 0.6, 0.85) == [LOW]  # once
    assert with_confidence_flag([], None, 0.85) == []  # nothing read, nothing judged
