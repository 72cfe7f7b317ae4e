"""At-least-once delivery: every stage message delivered twice, and a worker that died mid-claim.

The duplicates are real messages on the real broker, consumed by the real worker process (two
pool processes, so both copies can run at the same time). Consumers are paused with Celery's
remote control so that each duplicate waits in its queue next to the original.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from celery import current_app
from django.conf import settings
from django.utils import timezone

from apps.jobs.models import Job, Page, StageEvent
from bench.accuracy import strip_markdown, word_scores
from tests.support.documents import dev_file
from tests.support.jobs_api import upload, wait_for_job
from tests.support.queues import Broker
from workers.sweep import resend_lost_work


@pytest.fixture
def broker(worker, redis_client) -> Broker:
    broker = Broker(current_app, redis_client)
    broker.wait_idle()
    return broker


def _regions(page_id: int) -> list[tuple]:
    return list(Page.objects.get(pk=page_id).regions.order_by("order").values_list("pk", "order", "label", "text"))


def _stages(job_id: str) -> Counter:
    return Counter(StageEvent.objects.filter(job_id=job_id).values_list("stage", flat=True))


@pytest.mark.django_db(transaction=True)
def test_every_stage_delivered_twice_counts_once(api, broker):
    with broker.paused() as hold:
        resp = upload(api, dev_file("phototest.tif"))
        assert resp.status_code == 202, resp.content
        job_id = resp.json()["id"]
        broker.wait_for(lambda: broker.lengths()["cpu"] == 1, what="the ingest message")
        current_app.send_task("workers.ingest", [job_id])
        assert broker.lengths()["cpu"] == 2

        hold.resume("cpu")
        broker.wait_for(lambda: broker.lengths()["layout"] >= 1 and broker.drained("cpu"), what="both ingests")
        assert Page.objects.filter(job_id=job_id).count() == 1
        page = Page.objects.get(job_id=job_id)
        assert page.status == Page.Status.QUEUED
        current_app.send_task("workers.detect_layout", [[page.pk]])

        hold.resume("layout")
        broker.wait_for(
            lambda: broker.lengths()["ocr"] >= 1 and broker.drained("cpu", "layout"), what="both layout passes"
        )
        assert broker.lengths()["ocr"] == 1, "two layout passes both sent the page on to recognition"
        page.refresh_from_db()
        assert page.status == Page.Status.DETECTED
        layout_regions = page.regions.count()
        assert layout_regions > 0
        current_app.send_task("workers.recognize", [page.pk])

        hold.resume("ocr")
        done = wait_for_job(api, job_id)
        assert done["status"] == "done", done
    broker.wait_idle()
    finished = _regions(page.pk)
    job = Job.objects.get(pk=job_id)
    finished_at = job.finished_at

    # Late copies of every stage, after the job is done: none may change anything.
    current_app.send_task("workers.ingest", [job_id])
    current_app.send_task("workers.detect_layout", [[page.pk]])
    current_app.send_task("workers.recognize", [page.pk])
    current_app.send_task("workers.assemble", [job_id])
    current_app.send_task("workers.assemble", [job_id])
    broker.wait_idle()

    job.refresh_from_db()
    assert (job.status, job.pages_done, job.pages_failed, job.page_count) == ("done", 1, 0, 1)
    assert job.finished_at == finished_at
    assert _regions(page.pk) == finished, "a duplicate rewrote the page's regions"
    assert len(finished) >= layout_regions
    stages = _stages(job_id)
    assert stages["ingest"] == 1 and stages["layout"] == 1 and stages["recognize"] == 1, stages
    assert stages["assemble"] == 1, "the job finished more than once"
    md = api.get(f"/api/v1/jobs/{job_id}/result?format=markdown").content.decode()
    score = word_scores(strip_markdown(md), dev_file("phototest.gold.txt").read_text())
    assert score.precision >= 0.95 and score.recall >= 0.95, f"text lost or doubled: {score}"


@pytest.mark.django_db(transaction=True)
def test_sweep_requeues_a_claim_whose_worker_died(api, broker):
    """A worker took the layout message and died: the page sits in DETECTING with an old
    timestamp and its message is gone. sweep() must hand it back and send it again."""
    with broker.paused("layout"):
        resp = upload(api, dev_file("phototest.tif"))
        job_id = resp.json()["id"]
        broker.wait_for(lambda: broker.lengths()["layout"] == 1, what="the layout message")
        # Play the dead worker: it took the message (gone from the queue) and claimed the page.
        assert broker.redis.delete("layout") == 1
        long_ago = timezone.now() - timedelta(seconds=settings.OCR_STALE_AFTER + 60)
        assert (
            Page.objects.filter(job_id=job_id, status=Page.Status.QUEUED).update(
                status=Page.Status.DETECTING, claimed_at=long_ago, updated_at=long_ago, attempts=1
            )
            == 1
        )
        counts = resend_lost_work()
        assert counts["released_detecting"] == 1 and counts["layout"] >= 1, counts
        assert broker.lengths()["layout"] == 1
    done = wait_for_job(api, job_id)
    assert done["status"] == "done", done
    page = Page.objects.get(job_id=job_id)
    assert page.status == Page.Status.DONE
    # The layout pass that finished it is the page's second claim: the dead worker's was the first.
    layout = StageEvent.objects.get(job_id=job_id, stage="layout")
    assert layout.attempt == 2 and layout.outcome == "ok"
    assert "quick brown dog" in api.get(f"/api/v1/jobs/{job_id}/result").content.decode().lower()
