"""An operator's retry through real workers: only the failed page is redone, /metrics follows the
run's counts, and the worker's JSON log lines name their job and page."""

from __future__ import annotations

import json

import pytest
from django.core.files.storage import default_storage
from django.urls import reverse

from apps.jobs.models import Page, Region, StageEvent
from ocrsite.celery import app as celery_app
from tests.support.console import (
    client_for,
    make_operator,
    scrape,
    submit_bytes,
    tiff_pages,
    wait_status,
    workers_of_our_own,
)
from tests.support.queues import Broker

FAIL_CODE = "engine:injected-fault"


def regions_of(page: Page) -> list[tuple[int, object, str]]:
    return list(Region.objects.filter(page=page).order_by("pk").values_list("pk", "updated_at", "text"))


@pytest.fixture
def broker(redis_client) -> Broker:
    return Broker(celery_app, redis_client)


@pytest.fixture
def fresh_metrics(settings):
    settings.METRICS_CACHE_SECONDS = 0
    settings.METRICS_TOKEN = ""


@pytest.mark.django_db(transaction=True)
def test_retry_redoes_only_the_failed_page_and_metrics_follow(start_worker, broker, fresh_metrics):
    """A 3-page job whose page 2 fails (OCR_FAIL_PAGES=2 in the worker's environment) ends failed;
    with the cause removed (a worker without it), an operator's retry redoes page 2 alone: pages
    1 and 3 keep their region rows untouched, and the job finishes. /metrics counts both states,
    and the worker's JSON log lines carry job_id and page_id."""
    operator = make_operator()
    with workers_of_our_own():
        # No worker consumes yet: the ingest message waits in the cpu queue, and /metrics sees it.
        job = submit_bytes(tiff_pages(3), "three-pages.tif", owner=operator)
        waiting = scrape()
        assert waiting[("ocr_queue_depth", (("queue", "cpu"),))] == 1
        assert waiting[("ocr_queue_depth", (("queue", "layout"),))] == 0
        assert waiting[("ocr_jobs", (("status", "queued"),))] == 1
        assert waiting[("ocr_oldest_queued_age_seconds", (("queue", "cpu"),))] > 0
        failing = start_worker(env={"OCR_FAIL_PAGES": "2"}, name="console-failing")
        job = wait_status(job.pk, {"failed", "done"}, worker=failing)
        failing.stop()
        assert job.status == "failed", failing.tail()
        assert job.error_code == FAIL_CODE
        assert (job.pages_done, job.pages_failed, job.page_count) == (2, 1, 3)
        pages = {p.index: p for p in job.pages.all()}
        assert [pages[i].status for i in range(3)] == ["done", "failed", "done"]

        metrics = scrape()
        assert metrics[("ocr_jobs_failed_total", (("error_code", FAIL_CODE),))] == 1
        assert metrics[("ocr_pages_processed_total", (("engine", "cpu"), ("source", "ocr")))] == 2
        assert metrics[("ocr_pages_failed_total", (("engine", "cpu"), ("source", "ocr")))] == 1

        kept = {i: regions_of(pages[i]) for i in (0, 2)}
        assert kept[0] and kept[2], "finished pages must have regions"
        failed_before = {pk for pk, _, _ in regions_of(pages[1])}

        healthy = start_worker(env={"LOG_FORMAT": "json"}, name="console-healthy")
        resp = client_for(operator).post(reverse("admin:jobs_job_act", args=[job.pk, "retry"]))
        assert resp.status_code == 302
        job = wait_status(job.pk, {"done", "failed"}, worker=healthy)
        assert job.status == "done", healthy.tail()
        broker.wait_idle()
        healthy.stop()

    assert (job.pages_done, job.pages_failed) == (3, 0)
    for i in (0, 2):
        assert regions_of(pages[i]) == kept[i], f"page {i + 1} was touched by the retry"
    redone = regions_of(pages[1])
    assert redone and not ({pk for pk, _, _ in redone} & failed_before)
    assert "quick" in " ".join(text for _, _, text in redone).lower()
    # Only page 2 went through layout and recognition again.
    after = StageEvent.objects.filter(job=job, started_at__gte=job.events.get(stage="retry").started_at)
    assert {e.page_id for e in after.filter(stage__in=("layout", "recognize"))} == {pages[1].pk}
    retry_event = job.events.get(stage="retry")
    assert retry_event.actor == operator.username and retry_event.detail == {"pages": 1}
    with default_storage.open(job.result_markdown.name) as fh:
        assert fh.read().decode().lower().count("this is a lot of 12 point text") == 3  # once per page

    metrics = scrape()
    assert metrics[("ocr_jobs_submitted_total", (("engine", "cpu"),))] == 1
    assert metrics[("ocr_jobs_completed_total", (("engine", "cpu"),))] == 1
    assert ("ocr_jobs_failed_total", (("error_code", FAIL_CODE),)) not in metrics  # no job is failed now
    assert metrics[("ocr_pages_processed_total", (("engine", "cpu"), ("source", "ocr")))] == 3
    recognize_runs = StageEvent.objects.filter(job=job, stage="recognize").count()
    assert recognize_runs == 4  # 3 pages + the retried one
    assert metrics[("ocr_stage_duration_seconds_count", (("stage", "recognize"),))] == recognize_runs
    assert metrics[("ocr_stage_duration_seconds_bucket", (("le", "+Inf"), ("stage", "recognize")))] == recognize_runs
    for queue in ("cpu", "layout", "ocr", "webhooks"):
        assert metrics[("ocr_queue_depth", (("queue", queue),))] == 0
        assert metrics[("ocr_oldest_queued_age_seconds", (("queue", queue),))] == 0
    assert any(name == "django_http_requests_total_by_method_total" for name, _ in metrics)

    # JSON logs from the healthy worker: every pipeline line names its job, page lines their page.
    records = [json.loads(line) for line in healthy.log.read_text().splitlines() if line.startswith("{")]
    assert {"time", "level", "logger", "message", "job_id", "page_id"} <= set(records[0])
    pipeline_lines = [r for r in records if r["logger"].startswith("apps.jobs")]
    assert pipeline_lines, healthy.tail()
    assert all(r["job_id"] == str(job.pk) for r in pipeline_lines), pipeline_lines
    stage_lines = [r for r in pipeline_lines if r.get("stage") in ("layout", "recognize")]
    assert stage_lines and all(r["page_id"] == pages[1].pk for r in stage_lines)
