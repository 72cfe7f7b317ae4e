"""The VLM going away or saying "busy": the ``vllm`` recognizer in a real worker against the
in-test OpenAI-compatible server (tests/support/openai_server.py), which is stopped (connections
refused, as a crashed, rescheduled or scaled-to-zero vLLM pod gives), started again on the same
port, or made to answer 429 / 503 for a while (an overloaded vLLM).

- Down for R4_OUTAGE_S (60 s by default), shorter than VLLM_OVERLOAD_DEADLINE_S: the page waits
  it out inside the worker without spending an attempt, and once the server is back the job
  finishes.
- Down for longer than the deadline: the page fails with ``vllm:overloaded`` (the job fails with
  it); after the server is back, the admin's *Retry failed pages* redoes only that page, and the
  document's born-digital page keeps its regions untouched.
- 429 and 503 for a while under load, with one page attempt allowed: every page is done.
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
def test_vlm_down_shorter_than_the_deadline_is_waited_out_without_spending_attempts(api, start_worker, broker):
    port = free_port()
    # One page attempt: an outage that spent one would fail the page.
    with (
        vllm_worker(start_worker, port, OCR_MAX_ATTEMPTS="1", VLLM_OVERLOAD_DEADLINE_S="600") as (proc, name),
        broker.paused("ocr", keep=(f"{name}@{socket.gethostname()}",)),
    ):
        # The server is down from the start: nothing listens on the port.
        resp = upload(api, "outage.pdf", data=text_and_scan_pdf())
        assert resp.status_code == 202, resp.content
        job_id = resp.json()["id"]
        went_down = time.monotonic()
        deadline = went_down + 120
        while not Page.objects.filter(job_id=job_id, index=1, status="recognizing").exists():
            assert time.monotonic() < deadline, proc.tail()
            time.sleep(0.5)
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - went_down)))
        assert Job.objects.get(pk=job_id).status == "running"  # still waiting it out
        with OpenAIServer(answers, port=port) as server:
            done = wait_for_job(api, job_id, timeout=300)
            assert done["status"] == "done", (done, proc.tail())
            assert server.stats.completed >= 1
    assert recognize_outcomes(job_id) == ["ok"]
    scan = Page.objects.get(job_id=job_id, index=1)
    assert StageEvent.objects.filter(page=scan, stage="layout").exists()
    assert scan.attempts == 1  # the one claim that read it; the outage spent none
    md = api.get(f"/api/v1/jobs/{job_id}/result?format=markdown").content.decode()
    assert "born-digital first page" in md and "VLM read:" in md


@pytest.mark.django_db(transaction=True)
def test_vlm_down_past_the_deadline_fails_the_page_and_the_admin_retry_redoes_only_it(
    api, start_worker, broker, admin_client
):
    port = free_port()
    with (
        vllm_worker(start_worker, port, VLLM_OVERLOAD_DEADLINE_S="3") as (proc, name),
        broker.paused("ocr", keep=(f"{name}@{socket.gethostname()}",)),
    ):
        resp = upload(api, "outage.pdf", data=text_and_scan_pdf())
        job_id = resp.json()["id"]
        failed = wait_for_job(api, job_id, timeout=240)
        assert failed["status"] == "failed", (failed, proc.tail())
        assert failed["error"]["code"] == "vllm:overloaded"
        text_page, scan = Page.objects.get(job_id=job_id, index=0), Page.objects.get(job_id=job_id, index=1)
        assert (text_page.status, scan.status, scan.error_code) == ("done", "failed", "vllm:overloaded")
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


@pytest.mark.django_db(transaction=True)
def test_vlm_answering_429_and_503_under_load_finishes_every_page_with_attempts_unspent(
    api, start_worker, broker, capsys
):
    """Six scans at once to a server that answers 429 and 503 to everything for its first
    OVERLOAD_S, through a thread-pool worker (as the cluster's ocr tier runs) that allows each
    page ONE attempt: every page is done, each read by one claim. Before overload was told apart
    from failure, the busy answers spent VLLM_RETRIES, then the page's one attempt, and every page
    failed ``vllm:rate-limited``."""
    overload_s = 8.0
    started: list[float] = []
    refused: list[int] = []

    def busy_then_answers(body: dict, n: int) -> Reply:
        if not started:
            started.append(time.monotonic())
        if time.monotonic() - started[0] < overload_s:
            refused.append(n)
            return Reply(status=429 if n % 3 else 503)
        return answers(body, n)

    with OpenAIServer(busy_then_answers) as server:
        name = f"vlm-429-{os.getpid()}"
        proc = start_worker(
            queues="ocr",
            concurrency=4,
            pool="threads",
            name=name,
            env={
                "OCR_RECOGNIZER": "vllm",
                "VLLM_BASE_URL": server.url,
                "VLLM_PROFILE": "glm-ocr",
                "VLLM_RETRIES": "1",
                "VLLM_BACKOFF_S": "0.2",
                "VLLM_TIMEOUT_S": "10",
                "OCR_MAX_ATTEMPTS": "1",
                "VLLM_OVERLOAD_DEADLINE_S": "120",
            },
        )
        try:
            with broker.paused("ocr", keep=(f"{name}@{socket.gethostname()}",)):
                scan = PHOTOTEST.read_bytes()
                ids = [upload(api, f"busy-{i}.tif", data=scan).json()["id"] for i in range(6)]
                for job_id in ids:
                    done = wait_for_job(api, job_id, timeout=300)
                    assert done["status"] == "done", (done, proc.tail())
        finally:
            proc.stop()
    pages = list(Page.objects.filter(job_id__in=ids))
    assert len(pages) == 6 and all(p.status == "done" and p.attempts == 1 for p in pages), [
        (p.status, p.attempts) for p in pages
    ]
    assert StageEvent.objects.filter(job_id__in=ids, stage="recognize", outcome="retry").count() == 0
    with capsys.disabled():
        print(
            f"\n429/503 for {overload_s:.0f}s: {len(refused)} requests refused, {len(pages)} pages done, attempts 1 each"
        )
    assert len(refused) >= len(pages)  # every page met the overload, none paid for it
    assert all(Region.objects.filter(page=p, text__startswith="VLM read:").exists() for p in pages)
