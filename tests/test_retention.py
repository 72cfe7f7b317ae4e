"""Retention: finished jobs past OCR_RETENTION_DAYS lose their payload and results (files and
region text), keep their rows and timelines, once; /status and /result then agree (410).

Each test would catch a broken promise: a purge that deletes rows or misses files, one that
touches young or active jobs, one that purges twice, a batch that is not bounded, a metric that
does not move, and the 500 the course gateway's status endpoint gave once a result file was gone.
"""

from __future__ import annotations

import time
from datetime import timedelta

import numpy as np
import pymupdf
import pytest
from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from apps.jobs import services
from apps.jobs.documents import encode_png
from apps.jobs.models import Job, Page, Region, StageEvent
from ocrsite.celery import app as celery_app
from ocrsite.vocabulary import ErrorCode, TaskName
from tests.support.jobs_api import upload, wait_for_job

DAYS = 30


def old_job(status: str = "done", age_days: float = DAYS + 1, tenant: str = "", owner=None) -> Job:
    """A finished job with real files in storage, created ``age_days`` ago."""
    png = encode_png(np.full((40, 30, 3), 255, dtype=np.uint8))
    created = timezone.now() - timedelta(days=age_days)
    job = Job.objects.create(
        status=status,
        tenant=tenant,
        owner=owner,
        filename="old.pdf",
        kind="pdf",
        sha256="0" * 64,
        page_count=1,
        pages_done=1,
        finished_at=None if status in Job.ACTIVE else created + timedelta(minutes=1),
    )
    job.source.save(f"{job.pk}.pdf", ContentFile(b"%PDF-1.4 old"), save=False)
    job.result_markdown = services.save_bytes(f"results/{job.pk}.md", b"# old\n")
    job.result_json = services.save_bytes(f"results/{job.pk}.json", b'{"pages": []}')
    job.save()
    # auto_now_add ignores the value given at create: move the row into the past afterwards.
    Job.objects.filter(pk=job.pk).update(created_at=created)
    page = Page.objects.create(job=job, index=0, status="done", image=services.save_bytes(f"pages/{job.pk}/0.png", png))
    Region.objects.create(page=page, order=0, label="text", x0=0, y0=0, x1=1, y1=1, text="secret words")
    services.record(job.pk, "assemble", started=timezone.now())
    job.refresh_from_db()
    return job


def stored_names(job: Job) -> list[str]:
    names = [
        job.source.name,
        job.result_markdown.name,
        job.result_json.name,
        *job.pages.values_list("image", flat=True),
    ]
    return [n for n in names if n]  # text-layer pages store no image


@pytest.mark.django_db
def test_purge_takes_old_finished_payloads_and_keeps_rows_and_timelines(django_capture_on_commit_callbacks):
    expired = [old_job("done"), old_job("failed"), old_job("cancelled")]
    young = old_job("done", age_days=DAYS - 1)
    running = old_job("running")  # old but active: purging it would pull the input from under it
    names = {job.pk: stored_names(job) for job in [*expired, young, running]}
    assert all(default_storage.exists(n) for ns in names.values() for n in ns)

    with django_capture_on_commit_callbacks(execute=True):  # files go once the rows let go
        done = services.purge_expired(days=DAYS, batch=100)
    assert (done.jobs, done.left) == (3, 0)

    for job in expired:
        job.refresh_from_db()
        assert job.purged_at is not None
        assert not job.source and not job.result_markdown and not job.result_json
        assert not any(default_storage.exists(n) for n in names[job.pk])
        assert job.pages.count() == 1 and not job.pages.exclude(image="").exists()  # rows stay
        assert not Region.objects.filter(page__job=job).exists()  # region text is a result
        timeline = list(job.events.values_list("stage", "actor"))
        assert timeline == [("assemble", ""), ("purge", services.RETENTION_ACTOR)]
    for job in (young, running):
        job.refresh_from_db()
        assert job.purged_at is None and all(default_storage.exists(n) for n in names[job.pk])
        assert Region.objects.filter(page__job=job).count() == 1


@pytest.mark.django_db
def test_purge_is_batched_and_idempotent(django_capture_on_commit_callbacks):
    jobs = [old_job("done", age_days=DAYS + 10 - i) for i in range(5)]
    with django_capture_on_commit_callbacks(execute=True):
        first = services.purge_expired(days=DAYS, batch=2)
    assert (first.jobs, first.left) == (2, 3)
    # Oldest first: a backlog drains in creation order.
    assert {j.pk for j in Job.objects.exclude(purged_at=None)} == {jobs[0].pk, jobs[1].pk}
    with django_capture_on_commit_callbacks(execute=True):
        assert services.purge_expired(days=DAYS, batch=2) == services.Purged(jobs=2, left=1)
        assert services.purge_expired(days=DAYS, batch=2) == services.Purged(jobs=1, left=0)
        assert services.purge_expired(days=DAYS, batch=2) == services.Purged(jobs=0, left=0)
    # Each job was purged once: one event each, however often the task ran.
    assert StageEvent.objects.filter(stage="purge").count() == 5
    # An operator's purge of an already purged job is a no-op too.
    assert not services.purge(jobs[0].pk, actor="op")


@pytest.mark.django_db
def test_purged_jobs_are_metered(client, settings):
    settings.METRICS_CACHE_SECONDS = 0
    settings.METRICS_TOKEN = ""
    old_job("done")
    old_job("done")
    services.purge_expired(days=DAYS, batch=1)
    body = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    assert "ocr_jobs_purged_total 1.0" in body, [line for line in body.splitlines() if "purged" in line]


@pytest.mark.django_db
def test_status_and_result_agree_on_a_purged_job(api, user):
    job = old_job("done", tenant=user.username, owner=user)
    assert api.get(f"/status/{job.pk}").status_code == 200  # readable until the purge
    services.purge(job.pk, actor="op")
    for path in (f"/status/{job.pk}", f"/api/v1/jobs/{job.pk}/result?format=markdown"):
        resp = api.get(path)
        assert resp.status_code == 410, (path, resp.status_code, resp.content[:200])
        assert resp.json()["error"]["code"] == ErrorCode.JOB_RESULT_PURGED
    detail = api.get(f"/api/v1/jobs/{job.pk}").json()
    assert detail["status"] == "done" and detail["purged_at"]


@pytest.mark.django_db
def test_a_result_file_gone_from_storage_is_a_410_not_a_500(api, user):
    """Deleted behind the database's back (a bucket lifecycle rule, a hand clean-up)."""
    job = old_job("done", tenant=user.username, owner=user)
    default_storage.delete(job.result_markdown.name)
    for path in (f"/status/{job.pk}", f"/api/v1/jobs/{job.pk}/result?format=markdown"):
        resp = api.get(path)
        assert resp.status_code == 410, (path, resp.status_code, resp.content[:200])
        assert resp.json()["error"]["code"] == ErrorCode.JOB_RESULT_PURGED


def born_digital_pdf(text: str) -> bytes:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_textbox(pymupdf.Rect(60, 60, 535, 400), text, fontsize=12)
    return doc.tobytes()


def test_beat_schedules_the_purge_on_the_cpu_queue():
    entry = settings.CELERY_BEAT_SCHEDULE["purge-expired"]
    assert entry["task"] == TaskName.PURGE_EXPIRED
    assert settings.CELERY_TASK_ROUTES[TaskName.PURGE_EXPIRED]["queue"] == "cpu"


@pytest.mark.django_db(transaction=True)
def test_the_purge_task_runs_in_a_real_worker_on_a_real_job(api, worker):
    """Submit, finish, age the job, send the beat's message: a worker purges it, the API says so."""
    text = "Retention keeps rows and timelines but not the words of old documents."
    resp = upload(api, "old.pdf", data=born_digital_pdf(text))
    assert resp.status_code == 202, resp.content
    job_id = resp.json()["id"]
    assert wait_for_job(api, job_id, timeout=120)["status"] == "done"
    assert "old documents" in api.get(f"/api/v1/jobs/{job_id}/result?format=markdown").content.decode()
    job = Job.objects.get(pk=job_id)
    names = stored_names(job)
    Job.objects.filter(pk=job_id).update(created_at=timezone.now() - timedelta(days=settings.OCR_RETENTION_DAYS + 1))

    celery_app.send_task(TaskName.PURGE_EXPIRED)
    deadline = time.monotonic() + 60
    while Job.objects.get(pk=job_id).purged_at is None:
        assert time.monotonic() < deadline, f"not purged; worker log:\n{worker.tail()}"
        time.sleep(0.2)
    deadline = time.monotonic() + 10  # the files go just after the commit
    while any(default_storage.exists(n) for n in names):
        assert time.monotonic() < deadline, [n for n in names if default_storage.exists(n)]
        time.sleep(0.1)
    assert api.get(f"/status/{job_id}").status_code == 410
    assert api.get(f"/api/v1/jobs/{job_id}/result?format=json").status_code == 410
    assert list(Job.objects.get(pk=job_id).events.filter(stage="purge").values_list("actor", flat=True)) == [
        services.RETENTION_ACTOR
    ]
