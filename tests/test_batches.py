"""Batches on the real stack: a storage prefix expanded lazily into jobs on the bulk lane.

A worker consuming only the bulk queue runs every stage of the batch's jobs; the shared worker
(the online lane) runs none of them — both counted by the workers themselves (Celery's remote
``stats``). Documents are generated born-digital PDFs with a unique marker each, stored under
the tenant's allowed prefix in the deployment's storage (the local filesystem here; the S3 path
is the chaos module's, against moto).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest
from celery import current_app
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from apps.api.models import Tenant
from apps.jobs.models import Batch, Job
from tests.hostile.corpus import text_pdf
from tests.support.queues import Broker

STAGES = ("workers.ingest", "workers.assemble", "workers.expand_batch")


@pytest.fixture(scope="module")
def bulk_worker(start_worker):
    return start_worker(queues="bulk", name="bulk", env={"OCR_BATCH_POLL_SECONDS": "0.5"})


@pytest.fixture
def broker(worker, bulk_worker, redis_client) -> Broker:
    broker = Broker(current_app, redis_client)
    broker.wait_idle()
    return broker


def totals_by_worker() -> dict[str, Counter]:
    stats = current_app.control.inspect(timeout=5).stats() or {}
    return {
        name.split("@")[0]: Counter({t: n for t, n in s.get("total", {}).items() if t in STAGES})
        for name, s in stats.items()
    }


def wait_batch(api, batch_id: str, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        body = api.get(f"/api/v1/batches/{batch_id}").json()
        if body["status"] != "running":
            return body
        time.sleep(0.3)
    raise AssertionError(f"batch {batch_id} did not end in {timeout}s: {body}")


def manifest(api, batch_id: str) -> list[dict]:
    resp = api.get(f"/api/v1/batches/{batch_id}/manifest")
    assert resp.status_code == 200, resp.content[:300]
    return [json.loads(line) for line in b"".join(resp.streaming_content).decode().splitlines()]


def store_documents(prefix: str, n: int) -> dict[str, str]:
    """``n`` born-digital PDFs of 1-3 pages under ``prefix``: key -> unique marker."""
    markers = {}
    for i in range(n):
        marker = f"MARK{uuid.uuid4().hex[:10].upper()}"
        key = f"{prefix}doc-{i:04d}.pdf"
        default_storage.save(key, ContentFile(text_pdf(f"Archive document {marker} of the batch.", pages=1 + i % 3)))
        markers[key] = marker
    return markers


@pytest.mark.django_db(transaction=True)
def test_a_prefix_batch_runs_on_the_bulk_lane_each_document_once(api, user, broker, settings):
    prefix = f"archives/{user.username}/run-{uuid.uuid4().hex[:6]}/"
    Tenant.objects.filter(slug=user.username).update(batch_prefixes=f"archives/{user.username}/")
    markers = store_documents(prefix, 9)
    default_storage.save(f"{prefix}zz-broken.pdf", ContentFile(b"%PDF-1.7 not really a pdf"))
    before = totals_by_worker()

    resp = api.post("/api/v1/batches", {"prefix": prefix}, format="json")
    assert resp.status_code == 202, resp.content
    batch = wait_batch(api, resp.json()["id"])
    assert batch["status"] == "done", batch
    progress = batch["progress"]
    assert progress["items"] == 10 and progress["expanded"] and progress["fraction"] == 1.0
    assert progress["jobs"]["done"] == 9 and progress["jobs"]["failed"] == 1
    assert progress["pages_in"] == progress["pages_done"] + progress["pages_failed"]
    assert progress["pages_done"] == sum(1 + i % 3 for i in range(9))
    assert progress["cpu_seconds"] > 0  # worker CPU of the batch's expansion, ingests and assemblies
    # The broken item never reached ingest: what it cost is the expansion's (read, hash, probe).
    refused = Job.objects.get(batch_id=batch["id"], batch_item=f"{prefix}zz-broken.pdf")
    assert refused.status == Job.Status.FAILED and refused.cpu_ms > 0, refused.cpu_ms

    lines = manifest(api, batch["id"])
    assert Counter(line["item"] for line in lines) == Counter([*markers, f"{prefix}zz-broken.pdf"])
    broken = next(line for line in lines if line["item"].endswith("zz-broken.pdf"))
    assert broken["status"] == "failed" and broken["error"].startswith("input:")
    for line in lines:
        if line["item"] in markers:
            text = api.get(f"/api/v1/jobs/{line['job']}/result?format=markdown").content.decode()
            assert text.count(markers[line["item"]]) == line["pages"]  # once per page, in its own result only
    # Every stage on the bulk worker, none on the online one.
    after = totals_by_worker()
    online = after["shared"] - before.get("shared", Counter())
    bulk = after["bulk"] - before.get("bulk", Counter())
    assert bulk["workers.ingest"] == 9 and bulk["workers.assemble"] == 9, bulk
    assert not online, online
    # The objects are the tenant's: read in place, never copied into sources/.
    assert all(j.source.name == j.batch_item for j in Job.objects.filter(batch_id=batch["id"]))

    # The same prefix again: every document read before is answered from the result cache.
    again = wait_batch(api, api.post("/api/v1/batches", {"prefix": prefix}, format="json").json()["id"])
    redone = totals_by_worker()["bulk"] - after["bulk"]
    assert redone["workers.ingest"] == 0, redone
    cached = [line for line in manifest(api, again["id"]) if line["status"] == "done"]
    assert len(cached) == 9 and all(line["cached"] for line in cached)


@pytest.mark.django_db(transaction=True)
def test_refusals_and_cancel(api, user, broker, settings):
    resp = api.post("/api/v1/batches", {"prefix": "archives/"}, format="json")
    assert resp.status_code == 403 and resp.json()["error"]["code"] == "batch:prefix-not-allowed"
    Tenant.objects.filter(slug=user.username).update(batch_prefixes=f"archives/{user.username}/")
    for body in ({"prefix": f"archives/{user.username}/../other/"}, {"keys": ["elsewhere/x.pdf"]}):
        resp = api.post("/api/v1/batches", body, format="json")
        assert resp.json()["error"]["code"] == "batch:prefix-not-allowed", body
    resp = api.post("/api/v1/batches", {"keys": []}, format="json")
    assert resp.status_code == 400
    resp = api.post("/api/v1/batches", {"uploads": [str(uuid.uuid4())]}, format="json")
    assert resp.status_code == 404 and resp.json()["error"]["code"] == "upload:not-found"

    # A batch cancelled before its expansion ran makes no job; a second cancel is refused.
    prefix = f"archives/{user.username}/cancel-{uuid.uuid4().hex[:6]}/"
    store_documents(prefix, 6)
    with broker.paused("bulk"):
        batch_id = api.post("/api/v1/batches", {"prefix": prefix}, format="json").json()["id"]
        assert api.delete(f"/api/v1/batches/{batch_id}").status_code == 202
    assert api.delete(f"/api/v1/batches/{batch_id}").status_code == 409
    broker.wait_for(lambda: broker.redis.llen("bulk") == 0 and not broker.unacked(), what="the expansion")
    assert Batch.objects.get(pk=batch_id).status == Batch.Status.CANCELLED
    assert not Job.objects.filter(batch_id=batch_id).exists()
    assert api.get(f"/api/v1/batches/{batch_id}/manifest").status_code == 200


def test_the_cli_runs_a_batch_with_its_manifest(live_api, bulk_worker, tmp_path):
    """``ocr batch --prefix`` over real HTTP: it waits with its progress bar, writes the manifest,
    and exits 0 when every document is done."""
    Tenant.objects.create(slug=live_api.tenant, batch_prefixes=f"archives/{live_api.tenant}/")
    prefix = f"archives/{live_api.tenant}/cli/"
    markers = store_documents(prefix, 3)
    out = tmp_path / "manifest.jsonl"
    run = subprocess.run(
        [sys.executable, "-m", "ocrclient.cli", "batch", "--prefix", prefix, "-o", str(out), "--poll", "0.5"],
        env=live_api.env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "started" in run.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["item"] for line in lines) == sorted(markers)
    assert all(line["status"] == "done" for line in lines)


@pytest.mark.django_db
def test_the_admin_lists_batches_with_their_progress(admin_client):
    batch = Batch.objects.create(tenant="acme", source=Batch.Source.PREFIX, prefix="archives/acme/")
    Job.objects.create(
        tenant="acme", batch=batch, batch_item="archives/acme/a.pdf", status=Job.Status.DONE, page_count=2, pages_done=2
    )
    assert admin_client.get("/admin/jobs/batch/").status_code == 200
    page = admin_client.get(f"/admin/jobs/batch/{batch.pk}/change/")
    assert page.status_code == 200
    assert "pages in 2 = done 2 + failed 0" in page.content.decode()
