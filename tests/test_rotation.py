"""Rotation and conservation through the running system: a scan whose pages stand every way is
turned upright page by page at ingest and reads every page; a flagged page's job shows in the
console and in /metrics. (The pure checks are in tests/unit/test_rotation.py and
tests/unit/test_conservation.py.)"""

from __future__ import annotations

import io
import json

import numpy as np
import pymupdf
import pytest
from django.urls import reverse
from PIL import Image

from apps.jobs import services
from apps.jobs.documents import render_pdf_page
from apps.jobs.models import Page
from bench.accuracy import json_text, word_scores
from ocrsite.vocabulary import PageFlag
from tests.support.console import client_for, make_operator, read_on_a_worker_of_our_own, scrape, submit_bytes
from tests.support.documents import BUNDLED_DATA, dev_file
from tests.support.jobs_api import upload, wait_for_job
from workers.engines import textlayer


def _mixed_orientation_scan() -> bytes:
    """scanned_ocr_test.pdf's scan as a batch scanner delivers it: three pages standing at 0,
    180 and 90 degrees, each image turned in its pixels (no /Rotate to undo)."""
    with pymupdf.open(dev_file("scanned_ocr_test.pdf")) as src:
        image, _ = render_pdf_page(src[0], 150, 10**9)
    doc = pymupdf.open()
    for rotation in (0, 180, 90):
        turned = np.ascontiguousarray(np.rot90(image, -rotation // 90))
        height, width = turned.shape[:2]
        page = doc.new_page(width=width * 72 / 150, height=height * 72 / 150)
        jpeg = io.BytesIO()
        Image.fromarray(turned).convert("L").save(jpeg, format="JPEG", quality=85)
        page.insert_image(page.rect, stream=jpeg.getvalue())
    return doc.tobytes(garbage=3, deflate=True)


@pytest.mark.django_db(transaction=True)
def test_mixed_orientation_scan_reads_every_page(api, worker, settings):
    """Each page is turned upright at ingest, page by page; every page reads its words, the
    JSON records the turn, the stored page image is upright, and /metrics counts turned pages."""
    settings.METRICS_CACHE_SECONDS = 0
    resp = upload(api, "mixed.pdf", data=_mixed_orientation_scan())
    assert resp.status_code == 202, resp.content
    job_id = resp.json()["id"]
    done = wait_for_job(api, job_id, timeout=600)
    assert done["status"] == "done", done
    result = json.loads(api.get(f"/api/v1/jobs/{job_id}/result?format=json").content)
    visible = "Docling bundles PDF document conversion to JSON and Markdown in an easy self contained package"
    assert [p["rotation"] for p in result["pages"]] == [0, 180, 90]
    for page in result["pages"]:
        score = word_scores(json_text({"pages": [page]}), visible)
        assert score.recall >= 0.9, (page["index"], score)
        assert page["height"] > page["width"]  # stored upright: portrait again
        assert page["confidence"] >= 0.9, page["confidence"]
    assert result["flags"] == [] and all(p["flags"] == [] for p in result["pages"])
    assert set(Page.objects.filter(job_id=job_id).values_list("rotation", flat=True)) == {0, 90, 180}
    metrics = scrape()
    assert metrics[("ocr_pages_turned_total", (("rotation", "180"), ("source", "ocr")))] >= 1


@pytest.mark.django_db(transaction=True)
def test_unreadable_scan_is_left_as_submitted_and_flagged_everywhere(api, start_worker, settings):
    """An upright Hebrew page where no model reads Hebrew (a worker with OCR_OTHER_SCRIPTS=false: a
    deployment without Tesseract's models; with them the page is confirmed upright and read,
    tests/unit/test_orientation.py, tests/test_other_scripts.py): orientation is not confirmed, so
    the page is not turned; it is done, with orientation:unsure and script:unsupported on the page
    and the job — in the JSON, the console and /metrics. (Its lookalike Latin symbols are not kept
    as text, so no confidence is left to be low: script:unsupported says why.)"""
    settings.METRICS_CACHE_SECONDS = 0
    data = (BUNDLED_DATA / "orientation" / "hebtypo.jpg").read_bytes()
    job_id, done = read_on_a_worker_of_our_own(api, start_worker, "hebtypo.jpg", data, {"OCR_OTHER_SCRIPTS": "false"})
    assert done["status"] == "done", done
    result = json.loads(api.get(f"/api/v1/jobs/{job_id}/result?format=json").content)
    [page] = result["pages"]
    expected = {PageFlag.ORIENTATION_UNSURE, PageFlag.SCRIPT_UNSUPPORTED}
    assert page["rotation"] == 0 and set(page["flags"]) == expected, page["flags"]
    assert page["script"] == "unsupported"
    assert page["confidence"] is None or page["confidence"] < settings.OCR_LOW_CONFIDENCE
    assert set(result["flags"]) == expected

    operator = client_for(make_operator())
    detail = operator.get(reverse("admin:jobs_job_change", args=[job_id])).content.decode()
    assert 'id="ocr-flags"' in detail and all(flag in detail for flag in expected)
    metrics = scrape()
    for flag in expected:
        assert metrics[("ocr_pages_flagged_total", (("flag", flag),))] >= 1
        assert metrics[("ocr_jobs_flagged_total", (("flag", flag),))] >= 1


@pytest.mark.django_db
def test_flagged_job_is_visible_in_the_console_and_metrics(settings):
    """A page's flag reaches its job once (services.flag_job), the console's job list filters
    on it and the job page says it, and /metrics counts flagged pages and jobs by flag."""
    settings.METRICS_CACHE_SECONDS = 0
    data = (BUNDLED_DATA / "senate-expenditures.pdf").read_bytes()
    job = submit_bytes(data, "listing.pdf")
    page = Page.objects.create(job=job, index=0, source=Page.Source.TEXT_LAYER, flags=[textlayer.FLAG_TABLE_AS_TEXT])
    services.flag_job(job.pk, page.flags)
    services.flag_job(job.pk, page.flags)  # a redelivered page adds nothing
    job.refresh_from_db()
    assert job.flags == [textlayer.FLAG_TABLE_AS_TEXT]

    operator = client_for(make_operator())
    listing = operator.get(reverse("admin:jobs_job_changelist") + "?flagged=yes")
    assert listing.status_code == 200 and str(job.pk)[:8] in listing.content.decode()
    assert str(job.pk)[:8] not in operator.get(reverse("admin:jobs_job_changelist") + "?flagged=no").content.decode()
    detail = operator.get(reverse("admin:jobs_job_change", args=[job.pk])).content.decode()
    assert 'id="ocr-flags"' in detail and textlayer.FLAG_TABLE_AS_TEXT in detail

    metrics = scrape()
    assert metrics[("ocr_pages_flagged_total", (("flag", textlayer.FLAG_TABLE_AS_TEXT),))] == 1
    assert metrics[("ocr_jobs_flagged_total", (("flag", textlayer.FLAG_TABLE_AS_TEXT),))] == 1
    # Every page flag has its series, zero until one is seen.
    assert metrics[("ocr_pages_flagged_total", (("flag", PageFlag.ORIENTATION_UNSURE),))] == 0
