"""Reading order through the worker: a generated two-column page, from its text layer and,
rasterised, through OCR — column 1 entirely before column 2.

The XY-cut cases on boxes alone are tests/unit/test_order.py."""

from __future__ import annotations

import pymupdf
import pytest

from tests.support.jobs_api import upload, wait_for_job

COLUMN_1 = [
    "Apples ripen slowly in the northern orchards during the cool autumn months.",
    "Farmers pick them by hand and store them in wooden crates near the barn.",
    "Cider presses run day and night once the harvest reaches its peak.",
    "Orchard owners prune every tree in winter to keep the branches strong.",
]
COLUMN_2 = [
    "Rivers carry melted snow from the mountains down to the distant sea.",
    "Fishermen cast their nets where the current slows behind large rocks.",
    "Bridges of stone cross the water at each village along the valley.",
    "Boats moored at the harbour wait for the morning tide to turn.",
]


def two_column_pdf() -> bytes:
    """A full-width title over two columns whose paragraphs sit side by side, row by row."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_textbox(pymupdf.Rect(60, 60, 535, 100), "Notes on Orchards and Rivers", fontsize=20, align=1)
    for x0, sentences in ((60, COLUMN_1), (315, COLUMN_2)):
        for row, sentence in enumerate(sentences):
            y = 130 + 90 * row
            assert page.insert_textbox(pymupdf.Rect(x0, y, x0 + 220, y + 80), sentence, fontsize=11) >= 0
    data = doc.tobytes()
    doc.close()
    return data


def _assert_columns_in_order(markdown: str) -> None:
    text = " ".join(markdown.split())
    positions = []
    for sentence in COLUMN_1 + COLUMN_2:
        # The first five words locate a paragraph even if OCR misreads a later one.
        start = " ".join(sentence.split()[:5])
        assert start in text, (start, markdown)
        positions.append(text.index(start))
    assert positions == sorted(positions), f"columns interleave:\n{markdown}"
    assert text.index("Notes on Orchards and Rivers") < positions[0]


@pytest.mark.django_db(transaction=True)
def test_two_column_page_from_text_layer(api, worker):
    resp = upload(api, "two-columns.pdf", data=two_column_pdf())
    assert resp.status_code == 202, resp.content
    done = wait_for_job(api, resp.json()["id"])
    assert done["status"] == "done", done
    _assert_columns_in_order(api.get(f"/api/v1/jobs/{done['id']}/result").content.decode())


@pytest.mark.django_db(transaction=True)
def test_two_column_page_rasterised_through_ocr(api, worker):
    with pymupdf.open(stream=two_column_pdf(), filetype="pdf") as doc:
        png = doc[0].get_pixmap(dpi=200).tobytes("png")
    resp = upload(api, "two-columns.png", data=png)
    assert resp.status_code == 202, resp.content
    done = wait_for_job(api, resp.json()["id"])
    assert done["status"] == "done", done
    _assert_columns_in_order(api.get(f"/api/v1/jobs/{done['id']}/result").content.decode())
