"""Conservation: every word of a born-digital page's text layer reaches the result, checked page
by page on every born-digital PDF we have; a page that would lose words says so."""

from __future__ import annotations

from collections import Counter

import pymupdf
import pytest

from tests.support.documents import BUNDLED_DATA, SHARED_DATA
from workers.content import conservation, tables
from workers.engines import textlayer


def _born_digital_pages() -> list:
    pages = []
    for base in (BUNDLED_DATA, SHARED_DATA):
        for path in sorted(base.glob("*.pdf")) if base.exists() else []:
            try:
                doc = pymupdf.open(path)
            except Exception:
                continue  # the refusal fixtures (empty, broken): not documents with a text layer
            if doc.needs_pass:
                continue
            # The dense NICS table page costs seconds a reading: make test only.
            marks = [pytest.mark.slow] if "nics" in path.name else []
            pages += [
                pytest.param(str(path), page.number, marks=marks) for page in doc if textlayer.has_text_layer(page, 32)
            ]
    return pages


@pytest.mark.parametrize(("path", "index"), _born_digital_pages(), ids=lambda v: str(v).rsplit("/", 1)[-1])
def test_every_word_of_the_page_is_in_the_result(path, index):
    """The page's words (line-end hyphens joined) against the words its regions carry: body
    text, table cells, captions and notes, headers and footers. A failure names the words."""
    page = pymupdf.open(path)[index]
    read = textlayer.read_page(page, 100, textlayer.TextLayerConfig())
    verdict = conservation.check(page.get_text("words"), textlayer.carried_words(read.regions))
    assert verdict.held, f"{path} page {index + 1}: {verdict.describe()}"
    assert not read.flags, read.flags  # kept without falling back


def test_corpus_holds_the_rotated_documents():
    paths = {param.values[0].rsplit("/", 1)[-1] for param in _born_digital_pages()}
    assert {"senate-expenditures.pdf", "anticlockwise_table_1.pdf", "clockwise_table_1.pdf"} <= paths


def test_check_names_what_is_missing_and_accepts_mended_hyphens():
    words = [
        (0, 0, 1, 1, "conser-", 0, 0, 0),
        (0, 1, 1, 2, "vation", 0, 1, 0),
        (0, 2, 1, 3, "0.965", 0, 2, 0),
        (0, 2, 1, 3, "held", 0, 2, 1),
    ]
    assert conservation.check(words, Counter(["conservation", "0.965", "held"])).held
    assert conservation.check(words, Counter(["conser-", "vation", "0.965", "held"])).held
    lost = conservation.check(words, Counter(["conservation", "0965", ".", "held"]))
    assert not lost.held and lost.missing == Counter(["0.965"])
    assert lost.describe() == "1 of 4 words missing: 0.965"


def _ruled_table_page() -> pymupdf.Page:
    doc = pymupdf.open()
    page = doc.new_page()
    xs, ys = (60, 200, 340, 480), (100, 120, 140, 160, 180)
    for y in ys:
        page.draw_line((xs[0], y), (xs[-1], y))
    for x in xs:
        page.draw_line((x, ys[0]), (x, ys[-1]))
    for r, y in enumerate(ys[:-1]):
        for c, x in enumerate(xs[:-1]):
            page.insert_text((x + 5, y + 14), f"cell {r}.{c}" if r else f"Head {c}", fontsize=10)
    page.insert_text((60, 220), "A sentence under the table stays body text.", fontsize=10)
    return page


def test_table_that_would_lose_words_falls_back_to_text_and_is_flagged(monkeypatch):
    """No document we have makes the grid builder drop a word any more, so this test swaps in a
    builder that drops the last cell (the one boundary faked here): the page must not pass
    silently. The table goes back to plain text in reading order, every word is kept, and the
    page carries the flag that ingest copies onto the page and the job."""
    page = _ruled_table_page()
    intact = textlayer.read_page(page, 72, textlayer.TextLayerConfig())
    assert [b.label for b, _ in intact.regions].count("table") == 1 and not intact.flags

    build = tables.grid_from_words

    def lossy(*args, **kwargs):
        grid = build(*args, **kwargs)
        if grid is not None:
            grid.cells = grid.cells[:-1]
        return grid

    monkeypatch.setattr(tables, "grid_from_words", lossy)
    read = textlayer.read_page(page, 72, textlayer.TextLayerConfig())
    assert read.flags == (textlayer.FLAG_TABLE_AS_TEXT,)
    assert read.verdict.held
    assert [b.label for b, _ in read.regions].count("table") == 0
    [fallback] = [t for _, t in read.regions if textlayer.FLAG_TABLE_AS_TEXT in t.flags]
    assert fallback.text.splitlines()[:2] == ["Head 0 Head 1 Head 2", "cell 1.0 cell 1.1 cell 1.2"]
