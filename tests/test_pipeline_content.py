"""What comes out is right: real documents through REST → Redis → the real worker → results.

Word F1 (``bench.accuracy``) is measured on the JSON result's region texts, which keep
page headers and footers (the Markdown leaves them out) and each line as read; the Markdown is
checked too, with its syntax stripped.
"""

from __future__ import annotations

import json

import pymupdf
import pytest

from apps.jobs.models import Page, StageEvent
from bench.accuracy import json_text, strip_markdown, word_scores
from tests.support.documents import dev_file
from tests.support.jobs_api import upload, wait_for_job

# OCR'd pages are rendered at this resolution, as a scanner would deliver them.
RASTER_DPI = 200


def _finish(api, job_id: str) -> tuple[dict, str]:
    done = wait_for_job(api, job_id, timeout=300)
    assert done["status"] == "done", done
    result = api.get(f"/api/v1/jobs/{job_id}/result?format=json")
    assert result["Content-Type"].startswith("application/json")
    markdown = api.get(f"/api/v1/jobs/{job_id}/result?format=markdown").content.decode()
    return json.loads(result.content), markdown


def _text_layer_words(pdf_page: pymupdf.Page) -> str:
    return " ".join(w[4] for w in pdf_page.get_text("words"))


@pytest.mark.django_db(transaction=True)
def test_born_digital_pdf_comes_from_its_text_layer(api, worker):
    path = dev_file("multi_page.pdf")
    resp = upload(api, path)
    assert resp.status_code == 202, resp.content
    job_id = resp.json()["id"]
    result, markdown = _finish(api, job_id)

    with pymupdf.open(path) as doc:
        references = [_text_layer_words(p) for p in doc]
    assert len(result["pages"]) == len(references) == 5
    for page, reference in zip(result["pages"], references, strict=True):
        score = word_scores(json_text({"pages": [page]}), reference)
        print(f"multi_page.pdf text layer page {page['index'] + 1}: F1 {score.f1:.4f}")
        assert score.f1 >= 0.98, (page["index"], score)
        assert page["source"] == "text-layer"
        assert {r["source"] for r in page["regions"]} == {"text-layer"}
        assert {r["engine"] for r in page["regions"]} == {"pymupdf:text-layer"}
    whole = word_scores(json_text(result), "\n".join(references))
    in_markdown = word_scores(strip_markdown(markdown), "\n".join(references))
    print(f"multi_page.pdf text layer: JSON F1 {whole.f1:.4f}, Markdown F1 {in_markdown.f1:.4f}")
    assert whole.f1 >= 0.98 and in_markdown.f1 >= 0.98, (whole, in_markdown)
    assert markdown.startswith("# The Evolution of the Word Processor\n")

    # The fast lane: no page of it went near the layout or OCR engines.
    assert set(Page.objects.filter(job_id=job_id).values_list("source", flat=True)) == {"text-layer"}
    stages = set(StageEvent.objects.filter(job_id=job_id).values_list("stage", flat=True))
    assert stages == {"ingest", "assemble"}, stages
    # Boxes come in page pixels at OCR_DPI and in PDF points, and agree with each other.
    region = result["pages"][0]["regions"][0]
    scale = result["pages"][0]["dpi"] / 72
    assert region["bbox"][2] == pytest.approx(region["bbox_pt"][2] * scale, abs=0.1)
    assert 0 < region["bbox_pt"][2] <= result["pages"][0]["width_pt"]


@pytest.mark.django_db(transaction=True)
def test_rasterised_born_digital_pages_through_ocr(api, worker, tmp_path):
    """The same pages as images: the OCR path must read them nearly as well as the text layer."""
    with pymupdf.open(dev_file("multi_page.pdf")) as doc:
        pages = [(p.get_pixmap(dpi=RASTER_DPI).tobytes("png"), _text_layer_words(p)) for p in doc]
    job_ids = []
    for i, (png, _) in enumerate(pages):
        resp = upload(api, f"multi_page-{i + 1}.png", data=png)
        assert resp.status_code == 202, resp.content
        assert resp.json()["kind"] == "png"
        job_ids.append(resp.json()["id"])
    read, wanted = [], []
    for i, (job_id, (_, reference)) in enumerate(zip(job_ids, pages, strict=True)):
        result, markdown = _finish(api, job_id)
        page = result["pages"][0]
        assert page["source"] == "ocr"
        text = json_text(result)
        score = word_scores(text, reference)
        md_score = word_scores(strip_markdown(markdown), reference)
        print(
            f"multi_page.pdf page {i + 1} at {RASTER_DPI} dpi, OCR: JSON F1 {score.f1:.4f}, Markdown F1 {md_score.f1:.4f}"
        )
        assert score.f1 >= 0.95, (i, score)
        assert md_score.f1 >= 0.95, (i, md_score, markdown)
        read.append(text)
        wanted.append(reference)
        assert StageEvent.objects.filter(job_id=job_id, stage="layout").count() == 1
    whole = word_scores("\n".join(read), "\n".join(wanted))
    print(f"multi_page.pdf rasterised, OCR, all pages: F1 {whole.f1:.4f}")
    assert whole.f1 >= 0.95, whole


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("scan", "gold"), [("phototest.tif", "phototest.gold.txt"), ("eurotext.tif", "eurotext.txt")])
def test_scans_against_their_gold_text(api, worker, scan, gold):
    resp = upload(api, dev_file(scan))
    assert resp.status_code == 202, resp.content
    assert resp.json()["kind"] == "tiff"
    result, markdown = _finish(api, resp.json()["id"])
    reference = dev_file(gold).read_text()
    score = word_scores(json_text(result), reference)
    md_score = word_scores(strip_markdown(markdown), reference)
    print(f"{scan}: JSON F1 {score.f1:.4f}, Markdown F1 {md_score.f1:.4f}")
    assert score.f1 >= 0.95, score
    assert md_score.f1 >= 0.95, md_score
    regions = result["pages"][0]["regions"]
    assert all(r["source"] == "ocr" and r["engine"].startswith("rapidocr") for r in regions if r["text"])
    assert all(0 <= r["confidence"] <= 1 for r in regions if r["text"])


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", ["scanned_ocr_test.pdf", "scanned_ocr_test_rotated_90.pdf"])
def test_scanned_pdf_has_its_visible_words(api, worker, name):
    """scanned_ocr_test.pdf is an image-only page (no text layer); rendered, it reads:
    "Docling bundles PDF document conversion to JSON and Markdown in an easy self contained
    package". The _rotated_90 copy stores the same scan with /Rotate 270, so it is displayed
    on its side; ingest turns it back before layout and OCR."""
    path = dev_file(name)
    with pymupdf.open(path) as doc:
        assert not doc[0].get_text().strip(), "the fixture grew a text layer; this test is about OCR"
    resp = upload(api, path)
    assert resp.status_code == 202, resp.content
    result, markdown = _finish(api, resp.json()["id"])
    assert result["pages"][0]["source"] == "ocr"
    visible = "Docling bundles PDF document conversion to JSON and Markdown in an easy self contained package"
    score = word_scores(strip_markdown(markdown), visible)
    print(f"{name}: Markdown F1 {score.f1:.4f} against its visible words")
    assert score.recall == 1.0, (score, markdown)
    assert score.precision >= 0.9, (score, markdown)
