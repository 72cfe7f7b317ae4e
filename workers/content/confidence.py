"""A page's confidence: how surely its text was read, one number per page.

Defined as the character-weighted mean of its regions' confidences (each region's is the
recogniser's, over the lines it holds): a page of one confident heading and a paragraph of
garbage is judged mostly by the paragraph. Regions without text or without a confidence (a VLM's
answer, a picture) do not count; a page with none has no confidence (``None``). A text-layer
page's regions carry 1.0: their words were not guessed.
"""

from __future__ import annotations

from collections.abc import Iterable

from ocrsite.vocabulary import PageFlag


def page_confidence(regions: Iterable[tuple[str, float | None]]) -> float | None:
    """Character-weighted mean of ``(text, confidence)`` pairs; None when no region counts."""
    chars = weighted = 0.0
    for text, confidence in regions:
        n = len((text or "").strip())
        if n and confidence is not None:
            chars += n
            weighted += n * confidence
    return round(weighted / chars, 4) if chars else None


def with_confidence_flag(flags: Iterable[str], confidence: float | None, threshold: float) -> list[str]:
    """``flags`` with ``ocr:low-confidence`` added when ``confidence`` is under ``threshold`` (and
    taken away when it is not: a page read again is judged again)."""
    low = str(PageFlag.OCR_LOW_CONFIDENCE)
    kept = [f for f in flags if f != low]
    return [*kept, low] if confidence is not None and confidence < threshold else kept
