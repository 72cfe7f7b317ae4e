"""A service behind the door unreachable: a 503 with a stable code and Retry-After, never a 500.

- Redis down: ``busy:unavailable``, and nothing half-accepted.
- PostgreSQL down: ``busy:database`` from the API and from paths DRF never sees (the admin's
  session read), and a connection the server dropped is replaced at the next request.

The whole-stack version, Redis and then PostgreSQL killed and restarted under load with every
accepted job completing, is ``make test-chaos`` (tests/chaos)."""

from __future__ import annotations

import io
import time
import uuid

import psycopg
import pytest
from django.db import close_old_connections, connection
from django.test import override_settings
from rest_framework.test import APIClient

from apps.api.models import TenantAPIKey
from apps.jobs.models import Job
from tests.hostile.corpus import text_pdf
from tests.support.outages import closed_port, postgresql_unreachable


def _dead_redis_url() -> str:
    return f"redis://127.0.0.1:{closed_port()}/0"


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


# --- PostgreSQL ---------------------------------------------------------------------------------
# These use transactional_db: the connection is closed and reopened under the test, which the
# transaction the plain ``db`` fixture wraps around a test would not survive.


@pytest.fixture
def key_client(transactional_db) -> APIClient:
    """A client with a tenant's API key, as integrators call; it returns what Django would send
    instead of raising, so an exception that reaches ``handler500`` is seen as the client sees it."""
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    _, key = TenantAPIKey.objects.create_key(name=tenant, tenant=tenant)
    client = APIClient(HTTP_X_API_KEY=key)
    client.raise_request_exception = False
    return client


def _assert_busy_database(resp) -> None:
    assert resp.status_code == 503, (resp.status_code, resp.content[:300])
    assert resp.json()["error"]["code"] == "busy:database"
    assert resp["Retry-After"] == "5"


def test_api_answers_503_busy_database_while_postgresql_is_down(key_client):
    fh = io.BytesIO(text_pdf("before the outage"))
    fh.name = "before.pdf"
    made = key_client.post("/api/v1/jobs", {"file": fh}, format="multipart")
    assert made.status_code == 202, made.content[:300]
    job_id = made.json()["id"]
    with postgresql_unreachable():
        fh = io.BytesIO(text_pdf("during the outage"))
        fh.name = "outage.pdf"
        submitted = key_client.post(
            "/api/v1/jobs", {"file": fh}, format="multipart", HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex
        )
        _assert_busy_database(submitted)
        for path in (f"/api/v1/jobs/{job_id}", f"/api/v1/jobs/{job_id}/result", "/api/v1/jobs"):
            _assert_busy_database(key_client.get(path))
    assert Job.objects.count() == 1  # the refused submission stored nothing
    assert key_client.get(f"/api/v1/jobs/{job_id}").status_code == 200  # and back with the server


def test_paths_outside_drf_answer_503_busy_database_too(key_client):
    """The admin is a plain Django view: its session read (the lazy ``request.user`` behind a
    session cookie) fails outside DRF's handler and reaches Django's ``handler500``, which must
    not make it a 500. (No middleware reads the database on an ordinary request; one that did
    would end in the same ``handler500``.)"""
    key_client.cookies["sessionid"] = "x" * 32
    with postgresql_unreachable():
        _assert_busy_database(key_client.get("/admin/"))
    assert key_client.get("/admin/").status_code == 302  # to the login page, once it is back


def _drop_this_connection() -> None:
    """Have the server end this connection (as a restart does), from a second connection; the
    test database is on a shared server, so only our own backend goes."""
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        deadline = time.monotonic() + 10
        while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
            assert time.monotonic() < deadline, "the backend did not end"
            time.sleep(0.05)


@pytest.mark.parametrize("health_checks", [True, False], ids=["health-checks", "no-health-checks"])
def test_a_connection_the_server_dropped_is_replaced(key_client, monkeypatch, health_checks):
    """A persistent connection (``DATABASE_CONN_MAX_AGE``) the server ended. With health checks
    (``DATABASE_CONN_HEALTH_CHECKS``, the default) the next request finds it dead before use and
    opens another: no request fails. Without them the first request fails, as a 503 and not a
    500, and the connection is replaced after it.

    Django's test client does not send the request_started/finished signals to
    ``close_old_connections``; the test calls it where a served request would."""
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60)
    monkeypatch.setitem(connection.settings_dict, "CONN_HEALTH_CHECKS", health_checks)
    connection.close()  # the next connection is opened with the settings above
    assert key_client.get("/api/v1/jobs").status_code == 200
    _drop_this_connection()
    close_old_connections()  # request_started
    first = key_client.get("/api/v1/jobs")
    if health_checks:
        assert first.status_code == 200, first.content[:300]
    else:
        _assert_busy_database(first)
        close_old_connections()  # request_finished: the broken connection is closed
    assert key_client.get("/api/v1/jobs").status_code == 200
    connection.close()
