"""Unit-level repair: each branch of the sweep, one bad page in a layout batch, running out
of transient retries, and beat's sweep not retried through a database outage.

Rows are put in the state a crash or a lost message leaves behind, then the sweep (or the
layout stage) runs in this process against the real PostgreSQL and the real Redis broker; what
it sent is read back from the Redis lists themselves. The running workers' consumers are paused
meanwhile, so nothing consumes the messages under the test.

The layout engine is the real rapid-layout, except in the retry test, where a wrapper around it
raises the transient error a GPU out-of-memory gives (PaddleOCR's ``layout:oom``): that failure
cannot be provoked on a CPU box, and the wrapper raises exactly what ``workers.engines.paddle``
raises.
"""

from __future__ import annotations

import base64
import json

import pytest
from django.conf import settings

from apps.jobs import lanes
from apps.jobs.models import Job, Page, Region
from ocrsite.vocabulary import ErrorCode, TaskName
from tests.support.outages import postgresql_unreachable
from tests.support.perimeter import queues_held
from tests.support.pipeline_rows import long_ago, make_job, page_of, page_with_image, png_of_text
from tests.support.queues import QUEUES, clear_lanes
from workers import engine_setup, layout, sweep
from workers.engines.base import EngineError
from workers.sweep import resend_lost_work

# --- helpers -----------------------------------------------------------------------------------


@pytest.fixture
def sent(redis_client):
    """Hold the running workers' consumers and return a reader of what was sent since."""
    with queues_held(redis_client):
        redis_client.delete(*QUEUES)
        clear_lanes(redis_client)

        def read() -> list[tuple[str, str, list]]:
            """(queue, task name, args) of every message now waiting, oldest first; consumed."""
            out = []
            for queue in QUEUES:
                while (raw := redis_client.rpop(queue)) is not None:
                    msg = json.loads(raw)
                    args = json.loads(base64.b64decode(msg["body"]))[0]
                    out.append((queue, msg["headers"]["task"], args))
            return out

        yield read
        redis_client.delete(*QUEUES)
        clear_lanes(redis_client)


# --- the sweep, branch by branch -----------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("claimed", "waiting", "queue", "task"),
    [
        (Page.Status.DETECTING, Page.Status.QUEUED, "layout", TaskName.DETECT_LAYOUT),
        (Page.Status.RECOGNIZING, Page.Status.DETECTED, "ocr", TaskName.RECOGNIZE),
    ],
)
def test_a_stale_claim_is_handed_back_and_sent_again(sent, claimed, waiting, queue, task):
    """The worker holding the claim died: the page waits again and its message goes out once."""
    job = make_job("running", 1, [(claimed, 1)])
    fresh = make_job("running", 1, [(claimed, 1)], stale=False)  # a claim still being worked on
    counts = resend_lost_work()
    assert counts[f"released_{claimed}"] == 1
    assert page_of(job).status == waiting
    assert page_of(fresh).status == claimed
    pk = page_of(job).pk
    assert sent() == [(queue, task, [[pk]] if queue == "layout" else [pk])]
    # The re-sent page was touched: the next sweep waits a full period before sending it again.
    assert resend_lost_work()[f"released_{claimed}"] == 0
    assert sent() == []


@pytest.mark.django_db
@pytest.mark.parametrize("claimed", [Page.Status.DETECTING, Page.Status.RECOGNIZING])
def test_a_claim_whose_attempts_are_spent_fails_as_stalled(sent, claimed, django_capture_on_commit_callbacks):
    """A page that killed its worker on every attempt must not loop: it fails, and so does its job."""
    job = make_job("running", 2, [(claimed, settings.OCR_MAX_ATTEMPTS), ("done", 1)])
    Job.objects.filter(pk=job.pk).update(pages_done=1)
    with django_capture_on_commit_callbacks(execute=True):
        counts = resend_lost_work()
    assert counts[f"stalled_{claimed}"] == 1
    page = page_of(job)
    assert (page.status, page.error_code) == ("failed", ErrorCode.PAGE_STALLED)
    job.refresh_from_db()
    assert (job.status, job.error_code, job.pages_failed) == ("failed", ErrorCode.PAGE_STALLED, 1)
    assert sent() == []  # nothing to re-send for a failed page


@pytest.mark.django_db
def test_a_queued_job_whose_ingest_was_lost_is_ingested_again(sent):
    job = make_job("queued", 1, [])
    make_job("queued", 1, [], stale=False)  # just submitted: its ingest is on its way
    resend_lost_work()
    assert sent() == [("cpu", TaskName.INGEST, [str(job.pk)])]
    resend_lost_work()  # the next sweep waits a full OCR_STALE_AFTER before sending it again
    assert sent() == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("waiting", "queue", "task"),
    [(Page.Status.QUEUED, "layout", TaskName.DETECT_LAYOUT), (Page.Status.DETECTED, "ocr", TaskName.RECOGNIZE)],
)
def test_a_waiting_page_whose_message_was_lost_is_sent_again(sent, waiting, queue, task):
    """Redis lost the message (restarted without persistence): the page waits for nothing."""
    job = make_job("running", 1, [(waiting, 0)])
    make_job("running", 1, [(waiting, 0)], stale=False)
    make_job("cancelled", 1, [(waiting, 0)])  # a cancelled job's pages are not re-sent
    counts = resend_lost_work()
    pk = page_of(job).pk
    assert sent() == [(queue, task, [[pk]] if queue == "layout" else [pk])]
    assert counts["layout" if queue == "layout" else "recognize"] == 1


@pytest.mark.django_db
def test_a_job_whose_assembly_was_lost_is_assembled_again(sent):
    job = make_job("assembling", 1, [("done", 1)])
    make_job("assembling", 1, [("done", 1)], stale=False)
    resend_lost_work()
    assert sent() == [("cpu", TaskName.ASSEMBLE, [str(job.pk)])]
    # Not again at the next sweep: under a backlog, a copy every sweep period per waiting job
    # once buried the real work (found by make test-chaos: 36,000 copies in the cpu queue).
    resend_lost_work()
    assert sent() == []


@pytest.mark.django_db
def test_a_backlog_is_not_taken_for_lost_messages(sent, redis_client, monkeypatch):
    """Work waiting behind a full queue still has its message there: nothing is re-sent into a
    queue holding BATCH messages already (the 10,000-job chaos run: 40,000 copies in cpu); a
    stale claim is handed back all the same; once the queue drains, what waits is re-sent."""
    monkeypatch.setattr(sweep, "BATCH", 3)
    queued = make_job("queued", 1, [])
    assembling = make_job("assembling", 1, [("done", 1)])
    claimed = make_job("running", 1, [(Page.Status.DETECTING, 1)])
    waiting = make_job("running", 1, [(Page.Status.QUEUED, 0)])
    redis_client.lpush("cpu", *["backlog"] * 3)
    redis_client.lpush("layout", *["backlog"] * 3)
    counts = resend_lost_work()
    assert (counts["ingest"], counts["assemble"], counts["layout"]) == (0, 0, 1), counts
    assert redis_client.lrange("layout", 0, 0) != [b"backlog"], "the released claim went out"
    assert page_of(claimed).status == Page.Status.QUEUED
    redis_client.delete("cpu", "layout")
    Job.objects.filter(pk__in=[queued.pk, assembling.pk]).update(updated_at=long_ago())
    Page.objects.filter(job=waiting).update(updated_at=long_ago())
    resend_lost_work()
    got = sent()
    assert ("cpu", TaskName.INGEST, [str(queued.pk)]) in got
    assert ("cpu", TaskName.ASSEMBLE, [str(assembling.pk)]) in got
    assert ("layout", TaskName.DETECT_LAYOUT, [[page_of(waiting).pk]]) in got


@pytest.mark.django_db
def test_a_job_never_fully_split_is_ingested_again(sent):
    """Ingest died after making 2 of 3 pages: ingest again (it skips the pages it made)."""
    job = make_job("running", 3, [("done", 1), ("done", 1)])
    Job.objects.filter(pk=job.pk).update(pages_done=2, updated_at=long_ago())
    complete = make_job("running", 2, [("done", 1), ("recognizing", 1)], stale=False)
    resend_lost_work()
    assert sent() == [("cpu", TaskName.INGEST, [str(job.pk)])]
    assert page_of(complete, 1).status == "recognizing"
    resend_lost_work()
    assert sent() == []


# --- layout: one bad page fails alone; transient retries run out ----------------------------------


@pytest.mark.django_db
def test_one_bad_page_fails_alone_in_a_layout_batch(sent, django_capture_on_commit_callbacks):
    """Three jobs' pages in one pass: one image is garbage, one is gone from storage, one is fine.
    The two bad pages fail with their own codes; the good one goes on to recognition."""
    good = page_with_image(png_of_text())
    garbage = page_with_image(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    missing = page_with_image(None)
    with django_capture_on_commit_callbacks(execute=True):
        layout.detect_pages([garbage.pk, good.pk, missing.pk])
    for page, code in ((garbage, ErrorCode.PAGE_BAD_IMAGE), (missing, ErrorCode.PAGE_NO_IMAGE)):
        page.refresh_from_db()
        assert (page.status, page.error_code) == ("failed", code)
        assert Job.objects.get(pk=page.job_id).status == "failed"
    good.refresh_from_db()
    assert good.status == "detected" and Region.objects.filter(page=good).exists()
    assert Job.objects.get(pk=good.job_id).status == "running"
    # On to its tenant's lane of recognition, with a token on the ocr queue (apps.jobs.lanes).
    assert sent() == [("ocr", TaskName.RECOGNIZE, [None])]
    assert lanes.take("recognize", 5) == [(Job.objects.get(pk=good.job_id).tenant, str(good.pk))]


@pytest.mark.django_db
def test_layout_success_gives_recognition_its_own_attempts(sent, django_capture_on_commit_callbacks):
    """Two of the cap's attempts spent in layout (its workers died) and then layout succeeds: the
    page starts recognition with a full budget, so one more death does not fail a healthy page."""
    page = page_with_image(png_of_text())
    Page.objects.filter(pk=page.pk).update(attempts=settings.OCR_MAX_ATTEMPTS - 2)
    with django_capture_on_commit_callbacks(execute=True):
        layout.detect_pages([page.pk])  # the claim makes it OCR_MAX_ATTEMPTS - 1
    page.refresh_from_db()
    assert (page.status, page.attempts) == ("detected", 0)
    assert sent() == [("ocr", TaskName.RECOGNIZE, [None])]
    assert lanes.take("recognize", 5) == [(Job.objects.get(pk=page.job_id).tenant, str(page.pk))]


class OutOfMemory:
    """The real layout engine behind a GPU that is always out of memory (see the module doc)."""

    def __init__(self, real) -> None:
        self.real = real
        self.name = real.name
        self.calls = 0

    def detect(self, images):
        self.calls += 1
        raise EngineError(ErrorCode.LAYOUT_OOM, "out of memory in layout detection", permanent=False)


@pytest.mark.django_db
def test_transient_layout_failures_retry_until_the_attempts_run_out(
    sent, monkeypatch, django_capture_on_commit_callbacks
):
    engine = OutOfMemory(engine_setup.layout_engine("cpu"))
    monkeypatch.setattr(engine_setup, "layout_engine", lambda job_engine: engine)
    page = page_with_image(png_of_text())
    for attempt in range(1, settings.OCR_MAX_ATTEMPTS):
        with django_capture_on_commit_callbacks(execute=True):
            layout.detect_pages([page.pk])
        page.refresh_from_db()
        # Handed back and sent again (with backoff) while attempts are left.
        assert (page.status, page.attempts) == ("queued", attempt)
        assert sent() == [("layout", TaskName.DETECT_LAYOUT, [[page.pk]])]
    with django_capture_on_commit_callbacks(execute=True):
        layout.detect_pages([page.pk])
    page.refresh_from_db()
    assert (page.status, page.attempts, page.error_code) == ("failed", settings.OCR_MAX_ATTEMPTS, ErrorCode.LAYOUT_OOM)
    assert Job.objects.get(pk=page.job_id).error_code == ErrorCode.LAYOUT_OOM
    assert sent() == []  # no further retry
    assert engine.calls == settings.OCR_MAX_ATTEMPTS
    outcomes = list(page.events.order_by("id").values_list("outcome", flat=True))
    assert outcomes == ["retry"] * (settings.OCR_MAX_ATTEMPTS - 1) + ["failed"]


# --- beat's tasks are not retried ---------------------------------------------------------------


@pytest.fixture
def database_down(transactional_db):
    """The test database unreachable for this process: every query raises Django's real
    OperationalError (``tests.support.outages.postgresql_unreachable``; restored afterwards)."""
    with postgresql_unreachable():
        yield


def test_a_sweep_that_meets_a_database_outage_is_not_retried_but_ingest_is(database_down):
    """The next beat is the sweep's retry (it declares max_retries=0); a job stage retries."""
    from celery import signals
    from django.db import OperationalError

    from workers.ingest import ingest
    from workers.sweep import sweep

    retried: list[str] = []

    def on_retry(sender=None, **_kw):
        retried.append(sender.name)

    signals.task_retry.connect(on_retry)
    try:
        result = sweep.apply()
        assert result.state == "FAILURE" and isinstance(result.result, OperationalError)
        assert retried == []
        ingest.apply(args=["00000000-0000-0000-0000-000000000000"])
        assert retried == [TaskName.INGEST.value] * (settings.OCR_MAX_ATTEMPTS - 1)
    finally:
        signals.task_retry.disconnect(on_retry)
