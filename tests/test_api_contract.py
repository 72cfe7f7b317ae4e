"""The integrator's contract: the course gateway's dialect (/process, /status), result before done,
list filters and pages, cancel (and that workers honour it), probes, and the OpenAPI schema."""

from __future__ import annotations

import io
import json
import time
import uuid

import pytest
from celery import current_app
from django.conf import settings
from PIL import Image

from apps.jobs.models import Job, Page, StageEvent
from tests.support.documents import dev_file
from tests.support.jobs_api import upload
from tests.support.queues import Broker


@pytest.fixture
def broker(worker, redis_client) -> Broker:
    broker = Broker(current_app, redis_client)
    broker.wait_idle()
    return broker


def _error(resp, status: int, code: str) -> None:
    assert resp.status_code == status, (resp.status_code, resp.content[:300])
    assert resp.json()["error"]["code"] == code, resp.json()


@pytest.mark.django_db(transaction=True)
def test_gateway_process_and_status(api, worker):
    """POST /process → {task_id, status}; GET /status/{task_id} until done with the result."""
    buf = io.BytesIO()
    Image.open(dev_file("phototest.tif")).save(buf, format="PNG")
    buf.seek(0)
    buf.name = "phototest.png"
    resp = api.post("/process", {"file": buf}, format="multipart")
    assert resp.status_code == 202, resp.content
    body = resp.json()
    assert set(body) == {"task_id", "status"} and body["status"] == "queued"
    deadline = time.monotonic() + 180
    while True:
        status = api.get(f"/status/{body['task_id']}").json()
        if status["status"] in ("done", "failed") or time.monotonic() > deadline:
            break
        assert status["status"] in ("queued", "processing") and status["result"] is None
        time.sleep(0.25)
    assert status["status"] == "done", status
    assert status["error"] is None
    assert "lazy fox" in status["result"]["markdown"].lower()
    layout = status["result"]["layout"]
    assert len(layout) == 1 and layout[0]["regions"]
    assert {"label", "bbox", "bbox_pt", "text", "order"} <= set(layout[0]["regions"][0])
    _error(api.get(f"/status/{uuid.uuid4()}"), 404, "job:not-found")
    # A finished job cannot be cancelled.
    _error(api.delete(f"/api/v1/jobs/{body['task_id']}"), 409, "job:not-cancellable")


@pytest.mark.django_db(transaction=True)
def test_cancel_before_a_worker_sees_the_job(api, broker):
    with broker.paused():
        resp = upload(api, dev_file("phototest.tif"))
        job_id = resp.json()["id"]
        broker.wait_for(lambda: broker.lengths()["cpu"] == 1, what="the ingest message")
        _error(api.get(f"/api/v1/jobs/{job_id}/result"), 409, "job:not-ready")
        _error(api.get(f"/api/v1/jobs/{job_id}/result?format=json"), 409, "job:not-ready")
        _error(api.get(f"/api/v1/jobs/{job_id}/result?format=docx"), 400, "request:bad-format")
        cancelled = api.delete(f"/api/v1/jobs/{job_id}")
        assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
        assert cancelled.json()["finished_at"]
    broker.wait_idle()  # the worker took the ingest message and must have done nothing with it
    job = Job.objects.get(pk=job_id)
    assert job.status == "cancelled" and job.pages.count() == 0
    assert set(StageEvent.objects.filter(job_id=job_id).values_list("stage", flat=True)) == {"cancel"}
    again = api.delete(f"/api/v1/jobs/{job_id}")  # DELETE is idempotent
    assert again.status_code == 202 and again.json()["status"] == "cancelled"
    _error(api.get(f"/api/v1/jobs/{job_id}/result"), 409, "job:not-ready")


@pytest.mark.django_db(transaction=True)
def test_cancel_mid_run_stops_workers_at_their_next_claim(api, broker):
    with broker.paused("layout", "ocr"):
        job_id = upload(api, dev_file("phototest.tif")).json()["id"]
        broker.wait_for(lambda: broker.lengths()["layout"] == 1, what="the layout message")
        assert api.get(f"/api/v1/jobs/{job_id}").json()["status"] == "running"
        assert api.delete(f"/api/v1/jobs/{job_id}").status_code == 202
    broker.wait_idle()
    page = Page.objects.get(job_id=job_id)
    assert page.status == Page.Status.QUEUED and page.regions.count() == 0
    assert not StageEvent.objects.filter(job_id=job_id, stage__in=["layout", "recognize", "assemble"]).exists()
    assert Job.objects.get(pk=job_id).status == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_list_filters_by_status_and_pages(api, user):
    """Rows made directly: listing is a query over jobs, whichever way they got there."""
    page_size = settings.REST_FRAMEWORK["PAGE_SIZE"]
    statuses = ["done"] * (page_size - 1) + ["failed", "queued", "cancelled"]
    mine = [
        Job.objects.create(tenant=user.username, owner=user, kind="pdf", sha256="0" * 64, status=s, filename=f"{i}.pdf")
        for i, s in enumerate(statuses)
    ]
    Job.objects.create(tenant="someone-else", kind="pdf", sha256="0" * 64, status="done")

    first = api.get("/api/v1/jobs").json()
    assert first["count"] == len(mine) and len(first["results"]) == page_size and first["next"]
    second = api.get(first["next"]).json()
    assert second["next"] is None and second["previous"]
    seen = [j["id"] for page in (first, second) for j in page["results"]]
    assert seen == [str(j.pk) for j in reversed(mine)], "every own job once, newest first, no one else's"

    done = api.get("/api/v1/jobs?status=done").json()
    assert done["count"] == page_size - 1 and {j["status"] for j in done["results"]} == {"done"}
    several = api.get("/api/v1/jobs?status=failed,cancelled").json()
    assert several["count"] == 2 and {j["status"] for j in several["results"]} == {"failed", "cancelled"}
    _error(api.get(f"/api/v1/jobs/{Job.objects.get(tenant='someone-else').pk}"), 404, "job:not-found")
    # An unknown status (here with a NUL byte, which PostgreSQL refuses in text) is a 400, not a 500.
    _error(api.get("/api/v1/jobs?status=done%00"), 400, "request:bad-status")


@pytest.mark.django_db
def test_healthz_and_readyz(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200, ready.json()
    assert ready.json()["checks"] == {"database": "ok", "broker": "ok", "storage": "ok"}


@pytest.mark.django_db
def test_readyz_is_503_when_the_broker_is_unreachable(client, monkeypatch):
    """The broker URL of the Celery app the web process publishes with, pointed at a closed port."""
    monkeypatch.setitem(current_app.conf, "broker_url", "redis://127.0.0.1:1/0")
    monkeypatch.setitem(current_app.conf, "broker_write_url", "redis://127.0.0.1:1/0")
    ready = client.get("/readyz")
    assert ready.status_code == 503
    body = ready.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok" and body["checks"]["broker"].startswith("error")


@pytest.mark.django_db
def test_openapi_schema_lists_the_job_endpoints(api):
    resp = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert resp.status_code == 200, resp.content[:300]
    paths = json.loads(resp.content)["paths"]
    job = next(p for p in paths if p.startswith("/api/v1/jobs/{") and p.endswith("}/"))
    assert {"get", "post"} <= set(paths["/api/v1/jobs/"]) or {"get", "post"} <= set(paths.get("/api/v1/jobs", {}))
    assert {"get", "delete"} <= set(paths[job])
    assert any(p.endswith(("/result/", "/result")) for p in paths)
    assert "/process" in paths and any(p.startswith("/status/") for p in paths)
    assert api.get("/api/docs/").status_code == 200
