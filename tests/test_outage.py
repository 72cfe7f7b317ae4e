"""Redis unreachable at the door: a 503 with a stable code and Retry-After, never a 500, and
nothing half-accepted. (The whole-stack version, Redis killed and restarted under load with
every accepted job completing, is ``make test-chaos``: tests/chaos.)"""

from __future__ import annotations

import io
import socket

import pytest
from django.test import override_settings

from apps.jobs.models import Job
from tests.hostile.corpus import text_pdf


def _dead_redis_url() -> str:
    with socket.socket() as sock:  # a port nothing listens on once the socket is closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


@pytest.mark.django_db
def test_submissions_and_polls_get_503_while_redis_is_down(api, settings):
    dead = {"default": {**settings.CACHES["default"], "LOCATION": _dead_redis_url()}}
    before = Job.objects.count()
    with override_settings(CACHES=dead):
        fh = io.BytesIO(text_pdf("outage"))
        fh.name = "outage.pdf"
        for resp in (api.post("/api/v1/jobs", {"file": fh}, format="multipart"), api.get("/api/v1/jobs")):
            assert resp.status_code == 503, (resp.status_code, resp.content[:300])
            assert resp.json()["error"]["code"] == "busy:unavailable"
            assert int(resp["Retry-After"]) >= 1
    assert Job.objects.count() == before  # refused: nothing was stored
    assert api.get("/api/v1/jobs").status_code == 200  # and back once Redis is
