"""The course gateway's dialect, spoken to by a client written the way that course's clients are:
multipart ``file`` to ``POST /process``, then ``GET /status/{task_id}`` until ``done`` or
``failed`` (neural-maze/production-ocr-course, client_rt_producer/src/main.rs)."""

from __future__ import annotations

import time

import httpx

from apps.jobs.models import Job
from tests.support.documents import dev_file

GATEWAY_STATUSES = {"queued", "processing", "done", "failed"}


def course_client_ocr(base: str, headers: dict, path) -> dict:
    """A gateway client: submit, then poll for the two states the gateway's worker ends in."""
    with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
        with path.open("rb") as fh:
            submitted = http.post("/process", files={"file": (path.name, fh)})
        assert submitted.status_code == 202, submitted.text
        task = submitted.json()
        assert task == {"task_id": task["task_id"], "status": "queued"}
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            status = http.get(f"/status/{task['task_id']}").json()
            assert set(status) == {"task_id", "status", "result", "error"}
            assert status["status"] in GATEWAY_STATUSES, status
            if status["status"] in ("done", "failed"):
                return status
            time.sleep(0.25)
    raise AssertionError("the gateway client never saw done or failed")


def test_course_client_polls_until_done(live_api):
    headers = {"X-API-Key": live_api.key}
    status = course_client_ocr(live_api.url, headers, dev_file("phototest.tif"))
    assert status["status"] == "done" and status["error"] is None
    assert "lazy fox" in status["result"]["markdown"].lower()
    assert status["result"]["layout"][0]["regions"]
    health = httpx.get(f"{live_api.url}/health")
    assert health.status_code == 200 and health.content == b""


def test_failed_and_cancelled_read_as_failed_with_an_error_string(live_api):
    headers = {"X-API-Key": live_api.key}
    failed = Job.objects.create(
        tenant=live_api.tenant,
        kind="pdf",
        sha256="0" * 64,
        status="failed",
        error_code="engine:ocr-failed",
        error_message="1 page(s) failed (1): boom",
    )
    status = httpx.get(f"{live_api.url}/status/{failed.pk}", headers=headers).json()
    assert status["status"] == "failed" and status["result"] is None
    assert status["error"] == "engine:ocr-failed: 1 page(s) failed (1): boom"

    cancelled = Job.objects.create(tenant=live_api.tenant, kind="pdf", sha256="0" * 64, status="cancelled")
    status = httpx.get(f"{live_api.url}/status/{cancelled.pk}", headers=headers).json()
    assert status == {
        "task_id": str(cancelled.pk),
        "status": "failed",
        "result": None,
        "error": "job:cancelled: the job was cancelled",
    }
    missing = httpx.get(f"{live_api.url}/status/{'1' * 32}", headers=headers)
    assert missing.status_code == 404
