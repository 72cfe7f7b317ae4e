"""Operator actions on a job (the console, the API's DELETE): cancel, retry, rerun, purge.

Each takes a row lock or a conditional UPDATE, so two operators (or an operator and a worker)
acting at once cannot both win; each leaves a line in the job's timeline with its actor.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from apps.jobs import enqueue
from apps.jobs.models import Job, Page, Region
from apps.jobs.services import result_cache
from apps.jobs.services.storage import delete_stored
from apps.jobs.services.timeline import record
from apps.jobs.services.transitions import job_finished
from apps.jobs.states import PageStatus


def cancel(job_id, actor: str = "") -> bool:
    """Active → cancelled. Workers see it at their next claim and stop."""
    now = timezone.now()
    won = Job.objects.filter(pk=job_id, status__in=Job.ACTIVE).update(
        status=Job.Status.CANCELLED, finished_at=now, updated_at=now
    )
    if won:
        record(job_id, "cancel", started=now, actor=actor)
        job_finished.send(sender=Job, job_id=job_id)
    return bool(won)


def retry(job_id, actor: str = "") -> bool:
    """Failed → running again, re-doing only what failed; finished pages keep their regions."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.status != Job.Status.FAILED or not job.source:
            return False  # not failed, or purged: nothing left to retry from
        failed = list(job.pages.filter(status=Page.Status.FAILED).values_list("pk", flat=True))
        now = timezone.now()
        if job.pages.count() < job.page_count:
            # Ingest never finished: run it again; it skips pages that already exist.
            Page.objects.filter(pk__in=failed).update(status=PageStatus.QUEUED, updated_at=now)
            job.status = Job.Status.QUEUED
            send = lambda: enqueue.ingest(job.pk, job.tenant)  # noqa: E731
        else:
            reset_pages(failed, now)
            job.status = Job.Status.RUNNING
            send = lambda: enqueue.detect_layout(failed, tenant=job.tenant)  # noqa: E731
        after = _in_lane(job, send)
        job.pages_failed = 0
        job.error_code = ""
        job.error_message = ""
        job.finished_at = None
        job.save(update_fields=["status", "pages_failed", "error_code", "error_message", "finished_at", "updated_at"])
        record(job.pk, "retry", started=now, actor=actor, detail={"pages": len(failed)})
        transaction.on_commit(after)
    return True


def rerun(job_id, actor: str = "") -> bool:
    """A fresh attempt on the same input: pages and results are dropped and ingest runs again."""
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.status in Job.ACTIVE or not job.source:
            return False
        job.pages.all().delete()
        stale = result_cache.release(job)
        transaction.on_commit(lambda: delete_stored(stale, job.pk))
        job.cached_from = None
        job.status = Job.Status.QUEUED
        job.attempt += 1
        job.pages_done = job.pages_failed = 0
        job.error_code = job.error_message = ""
        job.started_at = job.finished_at = None
        job.result_markdown = job.result_json = ""
        job.save()
        record(job.pk, "rerun", started=timezone.now(), actor=actor, detail={"attempt": job.attempt})
        transaction.on_commit(_in_lane(job, lambda: enqueue.ingest(job.pk, job.tenant)))
    return True


def purge(job_id, actor: str = "") -> bool:
    """Delete a finished job's source, page images and results; the row and its timeline stay.

    Only jobs that are no longer active: a running job would trip over its missing input. The job
    is marked ``purged_at``; a second purge finds the mark and records nothing.
    """
    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None or job.status in Job.ACTIVE or job.purged_at:
            return False
        images = list(job.pages.exclude(image="").values_list("image", flat=True))
        # Result files other jobs still name (the result cache's) stay until their last user goes.
        results = result_cache.release(job)
        # A batch's item read in place is the tenant's own object, not ours to delete.
        source = "" if job.batch_item and job.source.name == job.batch_item else job.source.name
        names = [n for n in (source, *results, *images) if n]
        regions = Region.objects.filter(page__job=job)
        deleted_regions, _ = regions.delete()  # region text is a result too
        now = timezone.now()
        job.pages.update(image="", updated_at=now)
        job.source = job.result_markdown = job.result_json = ""
        job.purged_at = now
        job.save(update_fields=["source", "result_markdown", "result_json", "purged_at", "updated_at"])
        record(job.pk, "purge", started=now, actor=actor, detail={"files": len(names), "regions": deleted_regions})
        # Bytes go only once the rows no longer point at them; a failed delete leaves an orphan
        # file (logged), never a row pointing at nothing.
        transaction.on_commit(lambda: delete_stored(names, job.pk))
    return True


def _in_lane(job: Job, send):
    """``send`` on the job's lane: a batch's job stays on the bulk lane when an operator acts."""

    def sent() -> None:
        with enqueue.lane(enqueue.lane_of(bulk=job.batch_id is not None)):
            send()

    return sent


def reset_pages(page_ids: Iterable[int], now: datetime | None = None) -> None:
    """Back to waiting for layout, with their regions gone (layout will write new ones)."""
    ids = list(page_ids)
    Page.objects.filter(pk__in=ids).update(
        status=PageStatus.QUEUED, error_code="", error_message="", updated_at=now or timezone.now()
    )
    Region.objects.filter(page_id__in=ids).delete()
