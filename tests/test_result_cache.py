"""The result cache on the real stack: the same bytes and options are read once.

The counts of real work come from the worker process itself (Celery's remote ``stats``: tasks
it ran, by name) and from the stage events it wrote; a job answered from the cache must add none.
"""

from __future__ import annotations

from collections import Counter

import pytest
from celery import current_app
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.api.models import Tenant, TenantUser
from apps.jobs import services
from apps.jobs.models import CachedResult, Job, Page, StageEvent
from tests.support.documents import dev_file
from tests.support.jobs_api import upload, wait_for_job
from tests.support.queues import Broker

STAGES = ("workers.ingest", "workers.detect_layout", "workers.recognize", "workers.assemble")


@pytest.fixture
def broker(worker, redis_client) -> Broker:
    broker = Broker(current_app, redis_client)
    broker.wait_idle()
    return broker


def worker_totals() -> Counter:
    """Tasks the running worker processes have executed, by name, as they report it."""
    totals: Counter = Counter()
    for stats in (current_app.control.inspect(timeout=5).stats() or {}).values():
        totals.update({name: n for name, n in stats.get("total", {}).items() if name in STAGES})
    return totals


def first_done(api, job_id) -> dict:
    return api.get(f"/api/v1/jobs/{job_id}").json()


def recognitions(job_id) -> int:
    return StageEvent.objects.filter(job_id=job_id, stage="recognize", outcome="ok").count()


def submit_done(api, **fields) -> dict:
    resp = upload(api, dev_file("phototest.tif"), **fields)
    assert resp.status_code in (200, 202), resp.content
    return wait_for_job(api, resp.json()["id"])


@pytest.mark.django_db(transaction=True)
def test_same_bytes_and_options_are_read_once(api, broker, user, settings):
    first = submit_done(api)
    assert first["status"] == "done" and first["cached_from"] is None
    assert recognitions(first["id"]) >= 1
    entry = CachedResult.objects.get(job_id=first["id"])
    assert entry.scope == user.username  # per tenant by default
    broker.wait_idle()
    before = worker_totals()

    # Same bytes, same options: done in the 202 itself, naming the first job's result files.
    resp = upload(api, dev_file("phototest.tif"), name="again.tif")
    assert resp.status_code == 202, resp.content
    again = resp.json()
    assert again["status"] == "done" and again["cached_from"] == first["id"], again
    assert again["progress"]["pages_done"] == again["progress"]["pages_total"] == 1
    first_md = api.get(f"/api/v1/jobs/{first['id']}/result?format=markdown").content
    assert api.get(f"/api/v1/jobs/{again['id']}/result?format=markdown").content == first_md
    hit = Job.objects.get(pk=again["id"])
    assert hit.result_json.name == Job.objects.get(pk=first["id"]).result_json.name  # not a copy
    assert not Page.objects.filter(job_id=again["id"]).exists()
    # Cost: the first job's worker CPU is on it (and on /metrics, per tenant); the cached one cost none.
    assert first_done(api, first["id"])["cost"]["cpu_seconds"] > 0
    assert again["cost"]["cpu_seconds"] == 0
    settings.METRICS_CACHE_SECONDS = 0
    metrics = Client(REMOTE_ADDR="127.0.0.1").get("/metrics").content.decode()
    assert f'ocr_page_cpu_seconds_count{{tenant="{user.username}"}} 1.0' in metrics, metrics[-2000:]

    # A changed option is not a hit. Its job also serves as a barrier: anything the cached job
    # had queued would be done by the time this one is (ingest is FIFO on one queue).
    forced = submit_done(api, ocr="force")
    assert forced["status"] == "done" and forced["cached_from"] is None
    broker.wait_idle()
    delta = worker_totals() - before
    assert delta["workers.ingest"] == 1, delta  # the forced job's alone: the cached job sent none
    assert delta["workers.recognize"] == recognitions(forced["id"]) >= 1, delta
    assert recognitions(again["id"]) == 0
    assert not StageEvent.objects.filter(job_id=again["id"]).exclude(stage="cache").exists()

    # A changed model version is not a hit either (the web keys it; the worker, set up as
    # before, then keys its result differently and does not offer it).
    model = "tiny" if django_settings.OCR_CPU_REC_MODEL == "small" else "small"
    with override_settings(OCR_CPU_REC_MODEL=model):
        other_model = submit_done(api)
    assert other_model["cached_from"] is None
    assert recognitions(other_model["id"]) >= 1
    assert not CachedResult.objects.filter(job_id=other_model["id"]).exists()

    # Another tenant reads its own copy: sharing across tenants is off by default.
    other_tenant = _other_tenant_client()
    resp = upload(other_tenant, dev_file("phototest.tif"))
    assert resp.status_code == 202 and resp.json()["cached_from"] is None


def _other_tenant_client() -> APIClient:
    other = get_user_model().objects.create_user(username="cache-other-tenant", password="pw")
    tenant, _ = Tenant.objects.get_or_create(slug=other.username)
    TenantUser.objects.create(user=other, tenant=tenant)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=other).key}")
    return client


@pytest.mark.django_db(transaction=True)
def test_a_purged_result_is_not_pointed_at(api, broker):
    first = submit_done(api)
    hit = upload(api, dev_file("phototest.tif")).json()
    assert hit["cached_from"] == first["id"]
    names = [Job.objects.get(pk=first["id"]).result_markdown.name, Job.objects.get(pk=first["id"]).result_json.name]

    # The producer purged: its files stay while the cached job still names them.
    assert services.purge(first["id"], actor="test")
    assert all(default_storage.exists(n) for n in names)
    assert api.get(f"/api/v1/jobs/{hit['id']}/result?format=json").status_code == 200

    # The last user purged: the entry goes, then the files; a new submission is read afresh.
    assert services.purge(hit["id"], actor="test")
    assert not CachedResult.objects.filter(job_id=first["id"]).exists()
    assert not any(default_storage.exists(n) for n in names)
    fresh = submit_done(api)
    assert fresh["cached_from"] is None and recognitions(fresh["id"]) >= 1


@pytest.mark.django_db(transaction=True)
def test_cache_off_reads_again(api, broker):
    first = submit_done(api)
    with override_settings(OCR_RESULT_CACHE=False):
        second = submit_done(api)
    assert second["cached_from"] is None and recognitions(second["id"]) >= 1
    assert first["id"] != second["id"]
