"""Opt-in (``make test-vllm``): the vllm recognizer against a REAL vLLM server.

``.ci/vllm.sh`` starts vLLM's CPU build serving a tiny random Qwen2-VL with ``--max-num-seqs 2``
and sets VLLM_REAL_URL. The model's text is random, so these tests assert what the platform
owns: the request is accepted by vLLM's real validation (image parts, sampling params), a job
completes through the ``ocr`` queue, the in-flight bound holds, and vLLM's own
``vllm:num_requests_waiting`` (what KEDA scales on) rises under a burst and drains to 0.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time

import httpx
import numpy as np
import pytest

from apps.jobs.models import Region
from ocrsite.celery import app as celery_app
from tests.support.documents import ARTIFACTS, dev_file
from tests.support.jobs_api import upload, wait_for_job
from tests.support.queues import Broker
from workers.engines import profiles
from workers.engines.base import LayoutBox
from workers.engines.vllm import VllmConfig, VllmRecognizer

URL = os.environ.get("VLLM_REAL_URL", "")
pytestmark = [pytest.mark.vllm, pytest.mark.skipif(not URL, reason="VLLM_REAL_URL not set: run make test-vllm")]


@pytest.fixture(scope="module")
def model_id() -> str:
    return httpx.get(f"{URL}/models", timeout=30).json()["data"][0]["id"]


def metrics() -> str:
    return httpx.get(URL.removesuffix("/v1") + "/metrics", timeout=60).text


def metric(name: str, text: str | None = None) -> float:
    """The sum over a metric's series (counters such as request_success_total have one per
    finished_reason)."""
    values = re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)", text or metrics(), re.M)
    assert values, f"{name} not in /metrics"
    return sum(float(v) for v in values)


@pytest.mark.django_db(transaction=True)
def test_real_job_through_ocr_queue(api, worker, start_worker, redis_client, model_id):
    name = "vllm-real"
    proc = start_worker(
        queues="ocr",
        concurrency=1,
        name=name,
        env={
            "OCR_RECOGNIZER": "vllm",
            "VLLM_BASE_URL": URL,
            "VLLM_PROFILE": "qwen-vl",
            "VLLM_MODEL": model_id,
            "VLLM_MAX_TOKENS": "16",
            "VLLM_TIMEOUT_S": "300",
            "VLLM_RETRIES": "1",
        },
    )
    broker = Broker(celery_app, redis_client)
    try:
        with broker.paused("ocr", keep=(f"{name}@{socket.gethostname()}",)):
            resp = upload(api, dev_file("phototest.tif"))
            body = wait_for_job(api, resp.json()["id"], timeout=600)
    finally:
        proc.stop()
    assert body["status"] == "done", (body, proc.tail())
    regions = list(Region.objects.filter(page__job_id=body["id"]))
    assert regions and all(r.engine == "vllm:qwen-vl" for r in regions)
    # vLLM accepted every request (a rejected image part or parameter would be vllm:bad-request).
    assert all(r.status == "done" and not r.error_code for r in regions), [(r.label, r.error_code) for r in regions]
    assert metric("vllm:request_success_total") >= len(regions)


def test_burst_queues_inside_vllm_and_drains(model_id, monkeypatch):
    """24 long requests against max-num-seqs 2: vLLM's waiting gauge goes above 0 while the
    recognizer's own bound (24) is never exceeded, then everything drains to 0. Answers are
    long (ignore_eos, 1,800 tokens) so the burst outlasts /metrics stalls on two busy cores."""
    burst = dict(profiles.get("qwen-vl"), sampling={"ignore_eos": True})  # long answers, so they queue
    monkeypatch.setitem(profiles.PROFILES, "tiny-burst", burst)
    rec = VllmRecognizer(
        VllmConfig(
            base_url=URL,
            profile="tiny-burst",
            model=model_id,
            max_in_flight=24,
            max_tokens=1800,
            timeout_s=600,
            retries=0,
        )
    )
    page = np.full((200, 200, 3), 200, np.uint8)
    regions = [LayoutBox("text", (0, 0, 64 + i, 48)) for i in range(24)]
    seen: list[tuple[float, float]] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            try:
                text = metrics()  # one scrape per sample: it can take seconds on two busy cores
                seen.append((metric("vllm:num_requests_waiting", text), metric("vllm:num_requests_running", text)))
            except httpx.HTTPError:
                pass  # /metrics can stall for seconds under load on 2 cores
            time.sleep(0.2)

    # Several staggered scrapers: on two busy cores one /metrics answer can take tens of seconds,
    # and a single scraper would only see the gauges before and after the burst.
    pollers = [threading.Thread(target=poll, daemon=True) for _ in range(4)]
    for poller in pollers:
        poller.start()
        time.sleep(0.25)
    try:
        result = rec.recognize(page, regions)
    finally:
        done.set()
        for poller in pollers:
            poller.join(timeout=90)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "vllm-real-burst.json").write_text(json.dumps({"waiting_running": seen, "peak": rec.peak_in_flight}))
    assert all(t.error is None for t in result.texts), [t.error for t in result.texts]
    assert rec.peak_in_flight == 24
    assert max(w for w, _ in seen) > 0, seen
    assert max(r for _, r in seen) <= 2
    deadline = time.monotonic() + 60
    while metric("vllm:num_requests_waiting") != 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert metric("vllm:num_requests_waiting") == 0
    assert metric("vllm:num_requests_running") == 0
