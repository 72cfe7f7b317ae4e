"""A scanned Japanese page and a scanned Korean page through the running system on the default
profile (real API, PostgreSQL, Redis, Celery worker and engines): the JSON says each page's script,
the Japanese page reads, the Korean page is flagged ``script:unsupported`` (page, job, console and
/metrics), never passed off as read."""

from __future__ import annotations

import io
import json

import pymupdf
import pytest
from django.urls import reverse
from PIL import Image

from apps.jobs.documents import render_pdf_page
from apps.jobs.models import Page
from bench.accuracy import char_scores, json_text
from tests.support.console import client_for, make_operator, scrape
from tests.support.documents import BUNDLED_DATA
from tests.support.jobs_api import upload, wait_for_job
from workers.engines.cpu.script import FLAG_SCRIPT_UNSUPPORTED

SCRIPT_DATA = BUNDLED_DATA / "script"


def _scan(*names: str) -> tuple[bytes, list[str]]:
    """The pages as a scanner delivers them: 200-dpi greyscale JPEGs, no text layer; and their text."""
    doc, truths = pymupdf.open(), []
    for name in names:
        with pymupdf.open(SCRIPT_DATA / name) as src:
            image, _ = render_pdf_page(src[0], 200, 10**9)
            truths.append(src[0].get_text())
        height, width = image.shape[:2]
        page = doc.new_page(width=width * 72 / 200, height=height * 72 / 200)
        jpeg = io.BytesIO()
        Image.fromarray(image).convert("L").save(jpeg, format="JPEG", quality=90)
        page.insert_image(page.rect, stream=jpeg.getvalue())
    return doc.tobytes(garbage=3, deflate=True), truths


@pytest.mark.django_db(transaction=True)
def test_each_page_reads_in_its_script_or_is_flagged(api, worker, settings):
    settings.METRICS_CACHE_SECONDS = 0
    data, truths = _scan("japanese_text.pdf", "korean_text.pdf")
    resp = upload(api, "cjk.pdf", data=data)
    assert resp.status_code == 202, resp.content
    job_id = resp.json()["id"]
    done = wait_for_job(api, job_id, timeout=600)
    assert done["status"] == "done", done
    result = json.loads(api.get(f"/api/v1/jobs/{job_id}/result?format=json").content)
    japanese, korean = result["pages"]
    # (The orientation check, which reads with the tiny model, cannot confirm a kana-heavy page
    # upright and may flag it orientation:unsure; the page is read as it stands either way.)
    assert japanese["script"] == "cjk" and FLAG_SCRIPT_UNSUPPORTED not in japanese["flags"]
    assert char_scores(json_text({"pages": [japanese]}), truths[0]).f1 >= 0.95
    assert korean["script"] == "unsupported" and FLAG_SCRIPT_UNSUPPORTED in korean["flags"]
    assert FLAG_SCRIPT_UNSUPPORTED in result["flags"]

    operator = client_for(make_operator())
    listing = operator.get(reverse("admin:jobs_job_changelist") + "?flagged=yes")
    assert str(job_id)[:8] in listing.content.decode()
    pages = operator.get(reverse("admin:jobs_page_changelist") + "?script=unsupported")
    assert pages.status_code == 200 and pages.context["cl"].result_count == 1, "the console filters pages by script"
    assert list(Page.objects.filter(job_id=job_id).order_by("index").values_list("script", flat=True)) == [
        "cjk",
        "unsupported",
    ]
    metrics = scrape()
    assert metrics[("ocr_pages_flagged_total", (("flag", FLAG_SCRIPT_UNSUPPORTED),))] >= 1
    assert metrics[("ocr_jobs_flagged_total", (("flag", FLAG_SCRIPT_UNSUPPORTED),))] >= 1
