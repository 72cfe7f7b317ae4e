"""The VLM going away: the ``vllm`` recognizer in a real worker against the in-test
OpenAI-compatible server (tests/support/openai_server.py), which is stopped (connections refused, as a
crashed or rescheduled vLLM pod gives) and started again on the same port.

- Down for R4_OUTAGE_S (60 s by default), shorter than the retry budget: the page's recognition
  keeps failing transiently, its claim is handed back and re-sent with backoff, and once the
  server is back the job finishes.
- Down for longer than the budget: the page fails with ``vllm:unavailable`` (the job fails with
  it); after the server is back, the admin's *Retry failed pages* redoes only that page, and the
  document's born-digital page keeps its regions untouched.
"""

from __future__ import annotations

import io
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pymupdf
import pytest
from celery import current_app
from django.urls import reverse

from apps.jobs.models import Job, Page, Region, StageEvent
from tests.support.documents import ROOT
from tests.support.jobs_api import upload, wait_for_job
from tests.support.openai_server import OpenAIServer, Reply, prompt_of
from tests.support.queues import Broker

OUTAGE_S = float(os.environ.get("R4_OUTAGE_S", "60"))
PHOTOTEST = ROOT / "tests" / "data" / "phototest.tif"


def answers(body: dict, n: int) -> Reply:
    return Reply(text=f"VLM read: {prompt_of(body)}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def text_and_scan_pdf() -> bytes:
    """Page 1 born-digital (text layer, never sent to the VLM), page 2 a scan (sent to it)."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "A born-digital first page whose text layer skips OCR entirely.", fontsize=11)
    scan = doc.new_page()
    png = io.BytesIO()
    from PIL import Image

    with Image.open(PHOTOTEST) as img:
        img.convert("L").save(png, "PNG")
    scan.insert_image(scan.rect, stream=png.getvalue())
    return doc.tobytes()


@contextmanager
def vllm_worker(start_worker, port: int, **env: str) -> Iterator[tuple]:
    """A worker on ``ocr`` reading with vllm at 127.0.0.1:port (the caller pauses the others)."""
    name = f"vlm-outage-{os.getpid()}-{port}"
    proc = start_worker(
        queues="ocr",
        concurrency=1,
        name=name,
        env={
            "OCR_RECOGNIZER": "vllm",
            "VLLM_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "VLLM_PROFILE": "glm-ocr",
            "VLLM_RETRIES": "2",
            "VLLM_BACKOFF_S": "0.5",
            "VLLM_TIMEOUT_S": "10",
            **env,
        },
    )
    try:
        yield proc, name
    finally:
        proc.stop()


@pytest.fixture
def broker(worker, redis_client) -> Broker:
    broker = Broker(current_app, redis_client)
    broker.wait_idle()
    return broker


def recognize_outcomes(job_id: str) -> list[str]:
    return list(
        StageEvent.objects.filter(job_id=job_id, stage="recognize").order_by("id").values_list("outcome", flat=True)
    )


@pytest.mark.django_db(transaction=True)
def test_vlm_down_shorter_than_the_retry_budget_resumes_and_finishes(api, start_worker, broker):
    port = free_port()
    # A budget far above the outage: 30 attempts, each waiting up to 8 s (full jitter) plus the
    # client's own two retries; on average about two minutes.
    with (
        vllm_worker(
            start_worker, port, OCR_MAX_ATTEMPTS="30", OCR_RETRY_BACKOFF_S="4", OCR_RETRY_BACKOFF_MAX_S="8"
        ) as (proc, name),
        broker.paused("ocr", keep=(f"{name}@{socket.gethostname()}",)),
    ):
        # The server is down from the start: nothing listens on the port.
        resp = upload(api, "outage.pdf", data=text_and_scan_pdf())
        assert resp.status_code == 202, resp.content
        job_id = resp.json()["id"]
        went_down = time.monotonic()
        deadline = went_down + 120
        while "retry" not in recognize_outcomes(job_id):
            assert time.monotonic() < deadline, proc.tail()
            time.sleep(0.5)
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - went_down)))
        assert Job.objects.get(pk=job_id).status == "running"  # still waiting it out
        with OpenAIServer(answers, port=port) as server:
            done = wait_for_job(api, job_id, timeout=300)
            assert done["status"] == "done", (done, proc.tail())
            assert server.stats.completed >= 1
    outcomes = recognize_outcomes(job_id)
    retries = outcomes.count("retry")
    assert retries >= 2 and outcomes[-1] == "ok", outcomes
    scan = Page.objects.get(job_id=job_id, index=1)
    # Every recognition claim counted once on the row (layout's success started the count again):
    # each failed recognition and the last.
    assert StageEvent.objects.filter(page=scan, stage="layout").exists()
    assert scan.attempts == retries + 1
    md = api.get(f"/api/v1/jobs/{job_id}/result?format=markdown").content.decode()
    assert "born-digital first page" in md and "VLM read:" in md


@pytest.mark.django_db(transaction=True)
def test_vlm_down_past_the_budget_fails_the_page_and_the_admin_retry_redoes_only_it(
    api, start_worker, broker, admin_client
):
    port = free_port()
    with (
        vllm_worker(start_worker, port, OCR_MAX_ATTEMPTS="2", OCR_RETRY_BACKOFF_S="0.5") as (proc, name),
        broker.paused("ocr", keep=(f"{name}@{socket.gethostname()}",)),
    ):
        resp = upload(api, "outage.pdf", data=text_and_scan_pdf())
        job_id = resp.json()["id"]
        failed = wait_for_job(api, job_id, timeout=240)
        assert failed["status"] == "failed", (failed, proc.tail())
        assert failed["error"]["code"] == "vllm:unavailable"
        text_page, scan = Page.objects.get(job_id=job_id, index=0), Page.objects.get(job_id=job_id, index=1)
        assert (text_page.status, scan.status, scan.error_code) == ("done", "failed", "vllm:unavailable")
        kept = list(Region.objects.filter(page=text_page).order_by("pk").values_list("pk", "updated_at", "text"))
        assert kept

        with OpenAIServer(answers, port=port) as server:
            resp = admin_client.post(reverse("admin:jobs_job_act", args=[job_id, "retry"]))
            assert resp.status_code == 302
            done = wait_for_job(api, job_id, timeout=240)
            assert done["status"] == "done", (done, proc.tail())
            assert server.stats.completed >= 1
    assert list(Region.objects.filter(page=text_page).order_by("pk").values_list("pk", "updated_at", "text")) == kept
    scan.refresh_from_db()
    assert scan.status == "done" and Region.objects.filter(page=scan, text__startswith="VLM read:").exists()
    assert StageEvent.objects.filter(job_id=job_id, stage="retry").count() == 1
