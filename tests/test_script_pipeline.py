"""A scanned Japanese page, a scanned Korean page and a scanned Vietnamese page through the running
system on the default profile (real API, PostgreSQL, Redis, Celery workers and engines): the JSON
says each page's script. The Japanese page reads (upright, confirmed) with the PP-OCR full head;
the Korean and Vietnamese pages with Tesseract's models for them where those are installed
(workers/engines/cpu/other_scripts.py: the PP-OCR models have no Hangul and no Vietnamese tone
marks), and where they are not, are flagged ``script:unsupported`` and ``language:unsupported``
on the page, the job, the console and /metrics, never passed off as read."""

from __future__ import annotations

import io
import json

import pymupdf
import pytest
from django.urls import reverse
from PIL import Image

from apps.jobs.documents import render_pdf_page
from apps.jobs.models import Page
from bench.accuracy import char_scores, json_text, word_scores
from bench.evaluation.corpus import FILES as CORPUS_FILES
from ocrsite.vocabulary import PageFlag
from tests.support.console import client_for, make_operator, read_on_a_worker_of_our_own, scrape
from tests.support.documents import BUNDLED_DATA
from tests.support.jobs_api import upload, wait_for_job
from workers.engines.cpu.language import FLAG_LANGUAGE_UNSUPPORTED
from workers.engines.cpu.other_scripts import OtherScriptReader
from workers.engines.cpu.script import FLAG_SCRIPT_UNSUPPORTED

SCRIPT_DATA = BUNDLED_DATA / "script"
VIETNAMESE = CORPUS_FILES / "udhr" / "udhr_vie.pdf"  # the Declaration's first page (bench/corpus)


def _scan(*paths) -> tuple[bytes, list[str]]:
    """The pages as a scanner delivers them: 200-dpi greyscale JPEGs, no text layer; and their text."""
    doc, truths = pymupdf.open(), []
    for path in paths:
        with pymupdf.open(path) as src:
            image, _ = render_pdf_page(src[0], 200, 10**9)
            truths.append(src[0].get_text())
        height, width = image.shape[:2]
        page = doc.new_page(width=width * 72 / 200, height=height * 72 / 200)
        jpeg = io.BytesIO()
        Image.fromarray(image).convert("L").save(jpeg, format="JPEG", quality=90)
        page.insert_image(page.rect, stream=jpeg.getvalue())
    return doc.tobytes(garbage=3, deflate=True), truths


@pytest.mark.skipif(
    OtherScriptReader.find() is None,
    reason="Tesseract's models for other scripts are not installed here (bash .ci/script-models.sh installs them)",
)
@pytest.mark.django_db(transaction=True)
def test_each_page_reads_in_its_script(api, worker):
    data, truths = _scan(SCRIPT_DATA / "japanese_text.pdf", SCRIPT_DATA / "korean_text.pdf", VIETNAMESE)
    resp = upload(api, "scripts.pdf", data=data)
    assert resp.status_code == 202, resp.content
    job_id = resp.json()["id"]
    done = wait_for_job(api, job_id, timeout=600)
    assert done["status"] == "done", done
    result = json.loads(api.get(f"/api/v1/jobs/{job_id}/result?format=json").content)
    japanese, korean, vietnamese = result["pages"]
    # Confirmed upright: the orientation check reads again with the full head a page the tiny
    # head (no kana) leaves unsure; the Korean page by Tesseract's Korean model.
    assert japanese["script"] == "cjk" and japanese["flags"] == [], japanese["flags"]
    assert char_scores(json_text({"pages": [japanese]}), truths[0]).f1 >= 0.95
    assert korean["script"] == "hangul" and korean["flags"] == [], korean["flags"]
    assert word_scores(json_text({"pages": [korean]}), truths[1]).f1 >= 0.9
    assert vietnamese["script"] == "latin" and vietnamese["flags"] == [], vietnamese["flags"]
    assert (
        word_scores(json_text({"pages": [vietnamese]}), (VIETNAMESE.parent / "udhr_vie-p1.txt").read_text()).f1 >= 0.94
    )
    assert result["flags"] == []
    operator = client_for(make_operator())
    pages = operator.get(reverse("admin:jobs_page_changelist") + "?script=hangul")
    assert pages.status_code == 200 and pages.context["cl"].result_count == 1, "the console filters pages by script"


@pytest.mark.django_db(transaction=True)
def test_without_models_for_their_scripts_pages_are_flagged_everywhere(api, start_worker, settings):
    """A deployment without Tesseract's models (OCR_OTHER_SCRIPTS=false stands for it): the Korean
    page is flagged ``script:unsupported`` and the Vietnamese one ``language:unsupported`` (its
    tone-marked letters are in no PP-OCR dictionary) on the page, the job, the console and
    /metrics, never passed off as read; the Japanese page reads as before."""
    settings.METRICS_CACHE_SECONDS = 0
    data, truths = _scan(SCRIPT_DATA / "japanese_text.pdf", SCRIPT_DATA / "korean_text.pdf", VIETNAMESE)
    job_id, done = read_on_a_worker_of_our_own(api, start_worker, "cjk.pdf", data, {"OCR_OTHER_SCRIPTS": "false"})
    assert done["status"] == "done", done
    result = json.loads(api.get(f"/api/v1/jobs/{job_id}/result?format=json").content)
    japanese, korean, vietnamese = result["pages"]
    assert japanese["script"] == "cjk" and japanese["flags"] == [], japanese["flags"]
    assert char_scores(json_text({"pages": [japanese]}), truths[0]).f1 >= 0.95
    assert korean["script"] == "unsupported" and FLAG_SCRIPT_UNSUPPORTED in korean["flags"]
    assert FLAG_SCRIPT_UNSUPPORTED in result["flags"]
    assert vietnamese["script"] == "latin" and FLAG_LANGUAGE_UNSUPPORTED in vietnamese["flags"]
    assert PageFlag.ORIENTATION_UNSURE not in vietnamese["flags"]
    assert FLAG_LANGUAGE_UNSUPPORTED in result["flags"]

    operator = client_for(make_operator())
    listing = operator.get(reverse("admin:jobs_job_changelist") + "?flagged=yes")
    assert str(job_id)[:8] in listing.content.decode()
    pages = operator.get(reverse("admin:jobs_page_changelist") + "?script=unsupported")
    assert pages.status_code == 200 and pages.context["cl"].result_count == 1, "the console filters pages by script"
    assert list(Page.objects.filter(job_id=job_id).order_by("index").values_list("script", flat=True)) == [
        "cjk",
        "unsupported",
        "latin",
    ]
    metrics = scrape()
    assert metrics[("ocr_pages_flagged_total", (("flag", FLAG_SCRIPT_UNSUPPORTED),))] >= 1
    assert metrics[("ocr_jobs_flagged_total", (("flag", FLAG_SCRIPT_UNSUPPORTED),))] >= 1
    assert metrics[("ocr_pages_flagged_total", (("flag", FLAG_LANGUAGE_UNSUPPORTED),))] >= 1
    assert metrics[("ocr_jobs_flagged_total", (("flag", FLAG_LANGUAGE_UNSUPPORTED),))] >= 1
    page = operator.get(reverse("admin:jobs_job_change", args=[job_id]))
    assert FLAG_LANGUAGE_UNSUPPORTED in page.content.decode(), "the job page's banner names the flag"
