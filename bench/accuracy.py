"""Word-level agreement between an OCR result and a reference text, for bench/ and the tests.

Word F1 over bags of words: order-insensitive, so it measures what was read, not how the reading
order or the Markdown laid it out. ``order_scores`` is the order-aware counterpart: the same
words matched only in sequence (longest common subsequence), so paragraphs read in the wrong
order lose what they would keep in a bag. Words are compared after
Unicode NFKC folding, typographic quotes and dashes folded to ASCII, lower-casing and trimming
punctuation at their edges, so "Word," and "word" agree, while "l" for "1" or a split word still count as errors.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

# Markdown syntax the assembler adds, which a reference text does not contain.
_MD_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_MD_FENCE = re.compile(r"^```\w*\s*$", re.MULTILINE)
_MD_LINE_PREFIX = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|>\s+|\$\$\s*$)", re.MULTILINE)
_MD_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$", re.MULTILINE)
# Typographic quotes and dashes print the same as their ASCII forms; OCR cannot tell them apart.
_TYPOGRAPHIC = str.maketrans({"’": "'", "‘": "'", "‚": "'", "“": '"', "”": '"', "„": '"', "—": "-", "–": "-", "‐": "-"})
_TABLE_TAG = re.compile(r"</?(?:table|thead|tbody|tr|td|th)\b[^>]*>", re.IGNORECASE)
_EDGE_PUNCT = "\"'`.,;:!?()[]{}<>«»*_|~-"


@dataclass(frozen=True)
class WordScore:
    precision: float
    recall: float
    f1: float
    matched: int
    predicted: int
    reference: int


def words(text: str) -> list[str]:
    """Normalised words of ``text``: NFKC, lower case, edge punctuation trimmed, empties dropped."""
    out = []
    # A table cell border (a pipe or an HTML table tag) is never part of a word, even where no
    # space separates them.
    text = html.unescape(_TABLE_TAG.sub(" ", text))
    for raw in unicodedata.normalize("NFKC", text).translate(_TYPOGRAPHIC).lower().replace("|", " ").split():
        word = raw.strip(_EDGE_PUNCT)
        # A dash between spaces, a lone bullet or a table pipe carries no word.
        if word and any(ch.isalnum() for ch in word):
            out.append(word)
    return out


def word_scores(predicted: str, reference: str) -> WordScore:
    """Precision, recall and F1 of the bag of words of ``predicted`` against ``reference``."""
    pred, ref = Counter(words(predicted)), Counter(words(reference))
    matched = sum((pred & ref).values())
    n_pred, n_ref = sum(pred.values()), sum(ref.values())
    precision = matched / n_pred if n_pred else 0.0
    recall = matched / n_ref if n_ref else 0.0
    f1 = 2 * matched / (n_pred + n_ref) if n_pred + n_ref else 1.0
    return WordScore(precision, recall, f1, matched, n_pred, n_ref)


def order_scores(predicted: str, reference: str) -> WordScore:
    """Precision, recall and F1 of the words ``predicted`` has in the reference's order: matched
    words are the longest common subsequence of the two word sequences. Swapping two paragraphs
    of n words costs about n matches here and nothing in ``word_scores``."""
    pred, ref = words(predicted), words(reference)
    # LCS by dynamic programming over rows of the reference: O(len(pred) × len(ref)) time,
    # O(len(ref)) memory; pages are hundreds of words, so this is milliseconds.
    row = [0] * (len(ref) + 1)
    for word in pred:
        prev_diag = 0
        for j, other in enumerate(ref, start=1):
            above = row[j]
            row[j] = prev_diag + 1 if word == other else max(above, row[j - 1])
            prev_diag = above
    matched = row[-1]
    precision = matched / len(pred) if pred else 0.0
    recall = matched / len(ref) if ref else 0.0
    f1 = 2 * matched / (len(pred) + len(ref)) if pred or ref else 1.0
    return WordScore(precision, recall, f1, matched, len(pred), len(ref))


def word_f1(predicted: str, reference: str) -> float:
    return word_scores(predicted, reference).f1


def characters(text: str) -> list[str]:
    """Normalised characters of ``text`` for scripts written without spaces between words (CJK):
    NFKC (full-width digits and letters fold to ASCII), typographic quotes and dashes folded,
    lower case, whitespace and table borders dropped."""
    text = html.unescape(_TABLE_TAG.sub(" ", text))
    folded = unicodedata.normalize("NFKC", text).translate(_TYPOGRAPHIC).lower().replace("|", " ")
    return [ch for ch in folded if not ch.isspace()]


def char_scores(predicted: str, reference: str) -> WordScore:
    """Character F1 over bags of characters: ``word_scores``' counterpart for CJK, where a "word"
    is a whole clause and one wrong character would lose it all."""
    pred, ref = Counter(characters(predicted)), Counter(characters(reference))
    matched = sum((pred & ref).values())
    n_pred, n_ref = sum(pred.values()), sum(ref.values())
    precision = matched / n_pred if n_pred else 0.0
    recall = matched / n_ref if n_ref else 0.0
    f1 = 2 * matched / (n_pred + n_ref) if n_pred + n_ref else 1.0
    return WordScore(precision, recall, f1, matched, n_pred, n_ref)


def strip_markdown(markdown: str) -> str:
    """The words of an assembled Markdown document without the syntax the assembler added."""
    text = _MD_IMAGE.sub(" ", markdown)
    text = _MD_FENCE.sub(" ", text)
    text = _MD_TABLE_RULE.sub(" ", text)
    return _MD_LINE_PREFIX.sub(" ", text)


def json_text(result: dict) -> str:
    """All region texts of a JSON result (headers and footers included), page by page in order."""
    parts = []
    for page in result.get("pages", []):
        for region in sorted(page.get("regions", []), key=lambda r: r.get("order", 0)):
            if region.get("text"):
                parts.append(region["text"])
    return "\n".join(parts)


def teds(predicted_html: str, truth_html: str, *, structure_only: bool = False) -> float:
    """Tree-edit-distance similarity of two HTML tables (PubTabNet's TEDS, via
    ``table-recognition-metric``): 1.0 for the same structure and cell texts. Header cells must
    be written as ``<td>`` (``tables.to_html(..., th=False)``): the metric reads only ``td`` as
    cells. Imported here, not at module level: it is a dev/bench dependency."""
    from table_recognition_metric import TEDS

    def page(table: str) -> str:  # the metric looks for body/table
        return table if "<body" in table else f"<html><body>{table}</body></html>"

    return TEDS(structure_only=structure_only)(page(predicted_html), page(truth_html))
