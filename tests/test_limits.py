"""Spending controls at the door: per-tenant throttles, the daily page quota, backpressure from a
really filled queue, and idempotent submissions (including two racing with the same key).

Counters live in the real Redis cache; the backpressure queue is the real broker's, filled by
real submissions while the real worker's consumers are paused (Celery remote control).
"""

from __future__ import annotations

import io
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from celery import current_app
from django.db import connection
from django.utils import timezone

from apps.api import throttles
from apps.jobs import services
from apps.jobs.models import Job
from tests.hostile.corpus import text_pdf
from tests.support.documents import dev_file
from tests.support.jobs_api import wait_for_job
from tests.support.perimeter import key_client, new_key, queues_held
from tests.support.queues import Broker


class Clock:
    """The throttles' clock, pinned: a test decides which window or UTC day it is in, so a run
    that happens to straddle an hour or midnight counts the same as any other."""

    def __init__(self, at: datetime) -> None:
        self.at = at.timestamp()

    def __call__(self) -> float:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += seconds


@pytest.fixture
def clock(monkeypatch) -> Clock:
    pinned = Clock(datetime(2026, 6, 15, 12, 30, tzinfo=UTC))  # mid-hour, mid-day
    monkeypatch.setattr(throttles, "now", pinned)
    return pinned


@pytest.fixture
def held(redis_client):
    with queues_held(redis_client):
        yield


def _tenant_client(prefix: str = "t"):
    tenant = f"{prefix}-{uuid.uuid4().hex[:8]}"
    _, raw = new_key(tenant)
    return tenant, key_client(raw)


def _post(client, data: bytes, name: str = "doc.pdf", **headers):
    """A multipart submission; ``headers`` as WSGI names (HTTP_IDEMPOTENCY_KEY=...)."""
    fh = io.BytesIO(data)
    fh.name = name
    return client.post("/api/v1/jobs", {"file": fh}, format="multipart", **headers)


def _pdf_upload(client, pages: int = 1, text: str = "limits", **headers):
    return _post(client, text_pdf(text, pages=pages), **headers)


@pytest.mark.django_db(transaction=True)
def test_submission_throttle_refuses_the_n_plus_first_per_tenant(settings, held, clock):
    settings.OCR_RATE_SUBMISSIONS = "3/hour"
    tenant, client = _tenant_client()
    for i in range(3):
        assert _pdf_upload(client, text=f"n{i}").status_code == 202
    resp = _pdf_upload(client, text="n3")
    assert resp.status_code == 429
    assert resp.json()["error"]["code"] == "rate:submissions"
    assert int(resp["Retry-After"]) == 1800  # the pinned clock is half-way through the hour
    assert Job.objects.filter(tenant=tenant).count() == 3
    # The course gateway's door shares the tenant's budget.
    gateway = client.post("/process", {"file": _file(text_pdf("seed"))}, format="multipart")
    assert gateway.status_code == 429 and gateway.json()["error"]["code"] == "rate:submissions"
    # Polls have their own budget, and another tenant has its own window.
    assert client.get("/api/v1/jobs").status_code == 200
    assert _pdf_upload(_tenant_client()[1]).status_code == 202


@pytest.mark.django_db(transaction=True)
def test_poll_throttle_is_separate_from_submissions(settings, held, clock):
    settings.OCR_RATE_POLLS = "4/hour"
    _, client = _tenant_client()
    job = _pdf_upload(client).json()["id"]
    paths = [f"/api/v1/jobs/{job}", "/api/v1/jobs", f"/status/{job}", f"/api/v1/jobs/{job}"]
    assert [client.get(p).status_code for p in paths] == [200, 200, 200, 200]
    resp = client.get(f"/api/v1/jobs/{job}/result")
    assert resp.status_code == 429
    assert resp.json()["error"]["code"] == "rate:polls"
    assert int(resp["Retry-After"]) >= 1
    assert _pdf_upload(client).status_code == 202  # submissions are counted apart


@pytest.mark.django_db(transaction=True)
def test_daily_page_quota_counts_probed_pages(settings, held, clock):
    settings.OCR_QUOTA_PAGES_PER_DAY = 6
    tenant, client = _tenant_client()
    assert _pdf_upload(client, pages=5).status_code == 202
    resp = _pdf_upload(client, pages=2)
    assert resp.status_code == 429
    assert resp.json()["error"]["code"] == "quota:pages-per-day"
    assert int(resp["Retry-After"]) == 11 * 3600 + 1800  # until UTC midnight of the pinned day
    assert _pdf_upload(client, pages=1).status_code == 202  # the refused 2 pages were not charged
    assert throttles.pages_used_today(tenant) == 6
    assert _pdf_upload(client, pages=1).status_code == 429


@pytest.mark.django_db(transaction=True)
def test_windows_and_quota_days_turn_over_at_their_boundaries(settings, held, clock):
    """One second before the hour the window is spent; at the hour it is fresh. The same for the
    page quota at UTC midnight. Also what a real run crossing a boundary would see."""
    settings.OCR_RATE_SUBMISSIONS = "2/hour"
    settings.OCR_QUOTA_PAGES_PER_DAY = 2
    tenant, client = _tenant_client()
    clock.advance(29 * 60 + 58)  # 12:59:58
    assert _pdf_upload(client, text="a").status_code == 202
    assert _pdf_upload(client, text="b").status_code == 202
    clock.advance(1)  # 12:59:59
    refused = _pdf_upload(client, text="c")
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate:submissions"
    assert refused["Retry-After"] == "1"
    clock.advance(1)  # 13:00:00: a new window; the pages of the day are spent, though
    refused = _pdf_upload(client, text="c")
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "quota:pages-per-day"
    assert refused["Retry-After"] == str(11 * 3600)
    clock.advance(11 * 3600)  # 00:00:00 the next UTC day: a fresh quota and a fresh window
    assert throttles.pages_used_today(tenant) == 0
    assert _pdf_upload(client, text="c").status_code == 202
    assert throttles.pages_used_today(tenant) == 1


@pytest.fixture
def broker(worker, redis_client) -> Broker:
    broker = Broker(current_app, redis_client)
    broker.wait_idle()
    return broker


@pytest.mark.django_db(transaction=True)
def test_backpressure_from_a_really_filled_queue(broker, settings):
    settings.OCR_BACKPRESSURE_PAGES = 2
    settings.OCR_BACKPRESSURE_RETRY_AFTER = 7
    _, client = _tenant_client()
    scan = dev_file("phototest.tif").read_bytes()
    accepted = []
    with broker.paused():  # the worker stops taking work; submissions pile up in Redis for real
        for i in range(2):  # 0, then 1 page waiting: with the new page, not over the threshold
            resp = _post(client, scan, "scan.tif", HTTP_IDEMPOTENCY_KEY=f"scan-{i}")
            assert resp.status_code == 202, resp.content
            accepted.append(resp.json()["id"])
        assert broker.lengths()["cpu"] == 2
        assert throttles.waiting_pages() == 2
        refused = _post(client, scan, "scan.tif")
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "busy:backpressure"
        assert refused["Retry-After"] == "7"
        assert Job.objects.count() == 2
        # A replay asks for nothing new, so it is answered even under backpressure.
        replay = _post(client, scan, "scan.tif", HTTP_IDEMPOTENCY_KEY="scan-0")
        assert replay.status_code == 200 and replay.json()["id"] == accepted[0]
    for job_id in accepted:  # the worker resumes and drains the queue...
        assert wait_for_job(client, job_id)["status"] == "done"
    assert throttles.waiting_pages() == 0
    reopened = _post(client, scan, "scan.tif")
    assert reopened.status_code == 202  # ...and the door opens again
    # Leave the worker idle: a job still running would hold rows the next test's flush truncates.
    assert wait_for_job(client, reopened.json()["id"])["status"] == "done"


def _file(data: bytes, name: str = "doc.pdf"):
    fh = io.BytesIO(data)
    fh.name = name
    return fh


@pytest.mark.django_db(transaction=True)
def test_idempotency_key_returns_the_original_job_and_refuses_a_different_file(held):
    tenant, client = _tenant_client()
    first = _pdf_upload(client, text="same", HTTP_IDEMPOTENCY_KEY="order-42")
    assert first.status_code == 202 and "Idempotent-Replayed" not in first
    again = _pdf_upload(client, text="same", HTTP_IDEMPOTENCY_KEY="order-42")
    assert again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert again["Location"] == first["Location"]
    gateway = client.post(
        "/process", {"file": _file(text_pdf("same"))}, format="multipart", HTTP_IDEMPOTENCY_KEY="order-42"
    )
    assert gateway.status_code == 200 and gateway.json()["task_id"] == first.json()["id"]

    conflict = _pdf_upload(client, text="different", HTTP_IDEMPOTENCY_KEY="order-42")
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "idempotency:conflict"
    assert Job.objects.filter(tenant=tenant).count() == 1

    # Keys belong to a tenant: another tenant's "order-42" is its own job.
    _, other = _tenant_client()
    assert _pdf_upload(other, text="different", HTTP_IDEMPOTENCY_KEY="order-42").status_code == 202
    # Past the window the key is free again and names a new job.
    Job.objects.filter(tenant=tenant).update(created_at=timezone.now() - timedelta(hours=25))
    later = _pdf_upload(client, text="different", HTTP_IDEMPOTENCY_KEY="order-42")
    assert later.status_code == 202 and later.json()["id"] != first.json()["id"]
    assert Job.objects.filter(tenant=tenant).count() == 2

    bad = _pdf_upload(client, HTTP_IDEMPOTENCY_KEY="bad key\twith\ttabs")
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "request:bad-idempotency-key"


@pytest.mark.django_db(transaction=True)
def test_two_requests_racing_with_one_key_make_one_job(settings, held):
    """Both requests pass the lookup before either inserts (a barrier in the admission hook holds
    them there), so the unique constraint decides: one job, both callers get it, and the loser's
    page charge is refunded."""
    settings.OCR_QUOTA_PAGES_PER_DAY = 100
    tenant = f"race-{uuid.uuid4().hex[:8]}"
    data = text_pdf("race", pages=3)
    barrier = threading.Barrier(2, timeout=30)
    results: list[Job] = []
    errors: list[BaseException] = []

    def admit(found):
        barrier.wait()
        return throttles.admission(tenant)(found)

    def submit() -> None:
        try:
            upload = services.Upload(stream=io.BytesIO(data), filename="race.pdf", size=len(data))
            results.append(services.submit(upload, tenant=tenant, idempotency_key="same", admit=admit))
        except BaseException as exc:  # reported below; a thread cannot fail the test itself
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(results) == 2 and results[0].pk == results[1].pk
    assert sorted(j.replayed for j in results) == [False, True]
    assert Job.objects.filter(tenant=tenant).count() == 1
    assert throttles.pages_used_today(tenant) == 3
