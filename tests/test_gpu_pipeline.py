"""The GPU path through real workers, Redis and PostgreSQL.

- Layout batching: a burst of one-page jobs on the ``layout`` queue is merged across jobs into
  full batches by the collector (the CPU layout engine stands in for PaddleOCR there).
- vLLM recognition: real jobs through the ``ocr`` queue with a worker whose recognizer is
  ``vllm``, talking to an OpenAI-compatible server on 127.0.0.1 (vLLM itself cannot run in the
  default suite; ``make test-vllm`` runs a real one). Per-job engines (``vlm-page``, ``gpu``)
  and cancellation of in-flight requests are checked through the same workers.
"""

from __future__ import annotations

import io
import json
import socket
import statistics

import pytest
from django.conf import settings
from PIL import Image, ImageDraw

from apps.jobs.documents import load_image_frame
from apps.jobs.models import Job, Page, Region, StageEvent
from ocrsite.celery import app as celery_app
from tests.support.documents import dev_file
from tests.support.jobs_api import upload, wait_for_job
from tests.support.openai_server import OpenAIServer, Reply, prompt_of
from tests.support.queues import Broker
from workers.engines.base import LayoutBox
from workers.engines.cpu import CpuRecognizerConfig, RapidOcrRecognizer
from workers.engines.mixed import MixedRecognizer
from workers.engines.vllm import VllmConfig, VllmRecognizer

BURST = 50


def small_page(n: int) -> bytes:
    """A small one-page scan with a line of text: fast through every stage on 2 cores."""
    img = Image.new("RGB", (360, 120), "white")
    ImageDraw.Draw(img).text((20, 50), f"Burst page number {n}", fill="black")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def broker(redis_client) -> Broker:
    return Broker(celery_app, redis_client)


def worker_name(name: str) -> str:
    return f"{name}@{socket.gethostname()}"


@pytest.mark.django_db(transaction=True)
def test_layout_burst_is_collected_into_full_batches(api, worker, start_worker, broker):
    """50 one-page jobs wait on the layout queue; one layout worker (one process) takes them.
    The page-weighted mean batch recorded by the pipeline must be ≥ 0.9 × OCR_LAYOUT_BATCH,
    and every message is acknowledged after its pass (acks_late through the collector).

    Recognition is held back (``ocr`` paused) and the jobs are cancelled once their layout is
    recorded: what is measured is the layout queue, and 50 recognitions would take minutes on
    two shared cores."""
    batch = settings.OCR_LAYOUT_BATCH
    with broker.paused("layout", "ocr"):
        ids = []
        for n in range(BURST):
            resp = upload(api, None, name=f"burst-{n}.png", data=small_page(n))
            assert resp.status_code == 202, resp.content
            ids.append(resp.json()["id"])
        broker.wait_for(
            lambda: Page.objects.filter(job_id__in=ids, status=Page.Status.QUEUED).count() == BURST,
            timeout=120,
            what="every burst page ingested and waiting for layout",
        )
        broker.wait_for(lambda: broker.lengths()["layout"] >= BURST, timeout=10, what="layout messages queued")
        layout = start_worker(queues="layout", concurrency=1, name="gpu-layout")
        broker.wait_for(
            lambda: Page.objects.filter(job_id__in=ids, status=Page.Status.DETECTED).count() == BURST,
            timeout=180,
            what="every burst page through layout",
        )
        broker.wait_for(
            lambda: broker.lengths()["layout"] == 0 and broker.unacked() == 0,
            timeout=30,
            what="all layout messages acknowledged",
        )
        for job_id in ids:
            assert api.delete(f"/api/v1/jobs/{job_id}").status_code in (200, 202, 204)
    events = list(StageEvent.objects.filter(job_id__in=ids, stage="layout", outcome="ok"))
    assert len(events) == BURST
    sizes = [e.detail["batch"] for e in events]
    assert max(sizes) <= batch
    mean = statistics.mean(sizes)  # page-weighted: each page reports the pass it was in
    assert mean >= 0.9 * batch, (sorted(sizes), layout.tail())
    # A pass merged pages of different jobs.
    passes: dict = {}
    for e in events:
        passes.setdefault(e.started_at, set()).add(e.job_id)
    assert max(len(jobs) for jobs in passes.values()) == batch
    assert "prefetch raised to" in layout.log.read_text()


# The model's reading order (title, body, then the running header it emitted last) differs from
# a geometric top-to-bottom order, which would put the header first: the test checks it is kept.
GROUNDED = (
    "<|ref|>title<|/ref|><|det|>[[50, 100, 950, 160]]<|/det|>\n# Grounded title\n\n"
    "<|ref|>text<|/ref|><|det|>[[50, 200, 950, 600]]<|/det|>\nGrounded body text.\n\n"
    "<|ref|>header<|/ref|><|det|>[[50, 10, 950, 60]]<|/det|>\nRunning header"
)


def vlm_answers(body: dict, n: int) -> Reply:
    if prompt_of(body).startswith("<image>"):
        return Reply(text=GROUNDED)
    return Reply(text=f"VLM read: {prompt_of(body)}")


@pytest.fixture(scope="module")
def vllm_worker(worker, start_worker, broker):
    """A worker on ``ocr`` whose recognizer is vllm, against a test server; other workers'
    ``ocr`` consumers are paused meanwhile so every page of these tests goes through it."""
    with OpenAIServer(vlm_answers) as server:
        name = f"gpu-vllm-{socket.gethostname()[:4]}"
        proc = start_worker(
            queues="ocr",
            concurrency=2,
            name=name,
            env={
                "OCR_RECOGNIZER": "vllm",
                "VLLM_BASE_URL": server.url,
                "VLLM_PROFILE": "glm-ocr",
                "VLLM_RETRIES": "1",
                "VLLM_TIMEOUT_S": "30",
                "VLLM_CANCEL_POLL_S": "0.2",
            },
        )
        with broker.paused("ocr", keep=(worker_name(name),)):
            yield server, proc
        proc.stop()


@pytest.mark.django_db(transaction=True)
def test_job_through_ocr_queue_with_vllm_recognizer(api, vllm_worker):
    server, proc = vllm_worker
    resp = upload(api, dev_file("phototest.tif"))
    body = wait_for_job(api, resp.json()["id"])
    assert body["status"] == "done", (body, proc.tail())
    regions = list(Region.objects.filter(page__job_id=body["id"]))
    assert regions and all(r.engine == "vllm:glm-ocr" and r.status == "done" for r in regions)
    read = [r for r in regions if r.label != "figure"]
    assert {r.text for r in read} <= {
        "VLM read: Text Recognition:",
        "VLM read: Formula Recognition:",
        "VLM read: Table Recognition:",
    }
    # GLM-OCR has no prompt for figures: they are kept, unread, never sent.
    assert all(r.text == "" and "not-sent" in r.flags for r in regions if r.label == "figure")
    assert len(server.stats.requests) >= len(read)
    assert all(b["model"] == "zai-org/GLM-OCR" and b["temperature"] == 0.0 for b in server.stats.requests)
    md = api.get(f"/api/v1/jobs/{body['id']}/result?format=markdown").content.decode()
    assert "VLM read: Text Recognition:" in md
    # Cost: the VLM requests' GPU share is on the page and the job, the worker's CPU beside it.
    cost = api.get(f"/api/v1/jobs/{body['id']}").json()["cost"]
    assert cost["gpu_seconds"] > 0 and cost["cpu_seconds"] > 0, cost


@pytest.mark.django_db(transaction=True)
def test_vlm_page_job_skips_layout_and_keeps_grounded_regions(api, vllm_worker):
    server, proc = vllm_worker
    resp = upload(api, dev_file("phototest.tif"), engine="vlm-page")
    assert resp.status_code == 202, resp.content
    body = wait_for_job(api, resp.json()["id"])
    assert body["status"] == "done", (body, proc.tail())
    assert Job.objects.get(pk=body["id"]).engine == "vlm-page"
    # The page went from ingest straight to recognition: the layout tier never saw it.
    assert not StageEvent.objects.filter(job_id=body["id"], stage="layout").exists()
    assert StageEvent.objects.filter(job_id=body["id"], stage="recognize", outcome="ok").count() == 1
    (page_request,) = [b for b in server.stats.requests if prompt_of(b).startswith("<image>")]
    assert page_request["model"] == "deepseek-ai/DeepSeek-OCR" and page_request["skip_special_tokens"] is False
    result = json.loads(api.get(f"/api/v1/jobs/{body['id']}/result?format=json").content)
    page = result["pages"][0]
    regions = page["regions"]
    assert [r["label"] for r in regions] == ["title", "text", "header"]
    assert [r["text"] for r in regions] == ["# Grounded title", "Grounded body text.", "Running header"]
    # Boxes are in page pixels: 50/999 of the page width, not 50.
    assert regions[0]["bbox"][0] == pytest.approx(50 / 999 * page["width"], abs=0.5)


@pytest.mark.django_db(transaction=True)
def test_cancel_aborts_in_flight_vllm_requests(api, vllm_worker, broker):
    server, proc = vllm_worker
    server.behaviour = lambda body, n: Reply(hang=True)
    resp = upload(api, dev_file("phototest.tif"))
    job_id = resp.json()["id"]
    assert server.wait_for(lambda s: s.in_flight > 0, timeout=60), proc.tail()
    held = server.stats.in_flight
    assert api.delete(f"/api/v1/jobs/{job_id}").status_code in (200, 202, 204)
    # The worker notices within its poll interval and closes the connections: vLLM would abort.
    assert server.wait_for(lambda s: s.in_flight == 0 and s.disconnects >= held, timeout=10), proc.tail()
    assert wait_for_job(api, job_id)["status"] == "cancelled"
    broker.wait_for(
        lambda: StageEvent.objects.filter(job_id=job_id, stage="recognize").exists(),
        timeout=10,
        what="the recognize stage to record its end",
    )
    event = StageEvent.objects.get(job_id=job_id, stage="recognize")
    assert event.outcome == "cancelled" and event.error_code == "job:cancelled"
    server.behaviour = vlm_answers


@pytest.mark.django_db(transaction=True)
def test_gpu_job_without_paddle_weights_fails_naming_the_setting(api, worker):
    resp = upload(api, dev_file("phototest.tif"), engine="gpu")
    body = wait_for_job(api, resp.json()["id"])
    assert body["status"] == "failed"
    page = Page.objects.get(job_id=body["id"])
    assert page.error_code == "engine:unavailable"
    assert "OCR_PADDLE_MODEL_DIR" in page.error_message


def test_mixed_recognizer_sends_only_configured_labels_to_the_vlm():
    """rapidocr (real, CPU) reads the page; only the ``title`` region goes to the VLM server."""
    image, _ = load_image_frame(dev_file("phototest.tif").read_bytes(), 0, 60_000_000)
    h, w = image.shape[:2]
    regions = [LayoutBox("title", (0, 0, w, h * 0.12)), LayoutBox("text", (0, h * 0.12, w, h))]
    with OpenAIServer(vlm_answers) as server:
        vlm = VllmRecognizer(VllmConfig(base_url=server.url))
        mixed = MixedRecognizer(RapidOcrRecognizer(CpuRecognizerConfig()), vlm, ["title"])
        title, text = mixed.recognize(image, regions).texts
    assert len(server.stats.requests) == 1
    assert title.text == "VLM read: Text Recognition:"
    assert "quick brown dog" in text.text.lower()


@pytest.mark.django_db(transaction=True)
def test_mixed_recognizer_keeps_cpu_text_where_the_vlm_does_not_read():
    """A region routed to the VLM that the VLM does not read (page furniture the layout model
    marked ``abandon``) keeps rapidocr's text instead of being blanked."""
    image, _ = load_image_frame(dev_file("phototest.tif").read_bytes(), 0, 60_000_000)
    h, w = image.shape[:2]
    regions = [LayoutBox("header", (0, 0, w, h), task="abandon")]
    with OpenAIServer(vlm_answers) as server:
        vlm = VllmRecognizer(VllmConfig(base_url=server.url))
        mixed = MixedRecognizer(RapidOcrRecognizer(CpuRecognizerConfig()), vlm, ["header"])
        (header,) = mixed.recognize(image, regions).texts
    assert server.stats.requests == []
    assert "quick brown dog" in header.text.lower()
