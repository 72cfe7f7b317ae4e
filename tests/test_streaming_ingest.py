"""Streaming ingest: pages are stored and sent on one by one, so recognition starts on the first
pages while ingest still renders the last; a running job's partial result is readable; and
``pages=`` selects pages, checked at the door.

Real parts: PostgreSQL, Redis, the suite's worker process (two prefork processes: one ingests
while the other runs layout and recognition), the CPU engines, documents from the dev set.
"""

from __future__ import annotations

import time
from pathlib import Path

import pymupdf
import pytest

from apps.jobs.models import Job, Page, StageEvent
from tests.support.documents import dev_file
from tests.support.jobs_api import upload, wait_for_job

# Long enough that rendering it takes several times one page's recognition.
STREAM_PAGES = 40


def _scanned_book(tmp_path: Path, pages: int) -> Path:
    """A scanned PDF of ``pages`` pages: the dev set's one-page scan, repeated."""
    out = pymupdf.open()
    with pymupdf.open(dev_file("scanned_ocr_test.pdf")) as scan:
        for _ in range(pages):
            out.insert_pdf(scan)
    path = tmp_path / "book.pdf"
    out.save(path)
    out.close()
    return path


@pytest.mark.django_db(transaction=True)
def test_first_page_is_recognised_before_the_last_is_ingested(api, worker, tmp_path):
    book = _scanned_book(tmp_path, STREAM_PAGES)
    resp = upload(api, book)
    assert resp.status_code == 202, resp.content
    job_id = resp.json()["id"]

    # While the job runs, the partial result shows the pages done so far (and each page's status).
    seen_partial = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        body = api.get(f"/api/v1/jobs/{job_id}/result?partial=1&format=json").json()
        if body.get("partial") and body["pages_done"] >= 1 and body["status"] != "done":
            seen_partial = body
            break
        if body.get("status") in ("done", "failed") or "partial" not in body:
            break
        time.sleep(0.2)
    assert seen_partial, "no partial result with a done page was readable before the job ended"
    first = next(p for p in seen_partial["pages"] if p["status"] == "done")
    assert "docling" in " ".join(r["text"] for r in first["regions"]).lower(), first
    markdown = api.get(f"/api/v1/jobs/{job_id}/result?partial=1").content.decode()
    assert "<!-- page " in markdown

    done = wait_for_job(api, job_id, timeout=900)
    assert done["status"] == "done", done
    assert done["progress"]["pages_done"] == STREAM_PAGES

    first_recognised = (
        StageEvent.objects.filter(job_id=job_id, stage="recognize", outcome="ok").order_by("finished_at").first()
    )
    last_stored = Page.objects.filter(job_id=job_id).order_by("-created_at").first()
    assert first_recognised is not None
    assert first_recognised.finished_at < last_stored.created_at, (
        f"recognition of the first page ended at {first_recognised.finished_at}, "
        f"after the last page was stored at {last_stored.created_at}: ingest did not stream"
    )


@pytest.mark.django_db(transaction=True)
def test_pages_option_selects_pages_and_bad_ranges_are_refused_at_the_door(api, worker):
    pdf = dev_file("multi_page.pdf")  # 5 born-digital pages
    for bad in ("0-2", "3-1", "9", "1-50", "a-b", "", "1,,2"):
        resp = upload(api, pdf, pages=bad)
        assert resp.status_code == 400, (bad, resp.content)
        assert resp.json()["error"]["code"] == "request:bad-pages", (bad, resp.content)
    assert not Job.objects.exists()

    resp = upload(api, pdf, pages="2-3, 5")
    assert resp.status_code == 202, resp.content
    job_id = resp.json()["id"]
    assert resp.json()["progress"]["pages_total"] == 3
    done = wait_for_job(api, job_id)
    assert done["status"] == "done", done
    assert sorted(Page.objects.filter(job_id=job_id).values_list("index", flat=True)) == [1, 2, 4]
    indices = [p["index"] for p in api.get(f"/api/v1/jobs/{job_id}/result?format=json").json()["pages"]]
    assert indices == [1, 2, 4]
