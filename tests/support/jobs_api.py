"""Submitting to and polling the jobs API the way an integrator does, through DRF's test client."""

from __future__ import annotations

import io
import time
from pathlib import Path

from rest_framework.test import APIClient


def wait_for_job(api: APIClient, job_id: str, timeout: float = 180, until=("done", "failed", "cancelled")) -> dict:
    """Poll the API until the job reaches one of ``until``; fail with the worker's view if not."""
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        body = api.get(f"/api/v1/jobs/{job_id}").json()
        if body.get("status") in until:
            return body
        time.sleep(0.25)
    raise AssertionError(f"job {job_id} did not reach {until} in {timeout}s; last: {body}")


def upload(api: APIClient, path: Path | str, name: str | None = None, data: bytes | None = None, **fields):
    payload = data if data is not None else Path(path).read_bytes()
    fh = io.BytesIO(payload)
    fh.name = name or Path(path).name
    return api.post("/api/v1/jobs", {"file": fh, **fields}, format="multipart")
