"""Every status change of Job and Page made by the pipeline, each a compare-and-set.

The moves themselves are declared in ``apps.jobs.states``; a function here applies one and
returns whether it won. The loser does nothing more, so a message delivered twice, or a retry
racing a sweep, cannot double-count or double-finish.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.dispatch import Signal
from django.utils import timezone

from apps.jobs import enqueue
from apps.jobs.models import Job, Page
from apps.jobs.states import PAGE_TERMINAL, RELEASE, PageMove, PageStatus
from ocrsite.vocabulary import ErrorCode

log = logging.getLogger(__name__)

# Sent after a page reaches a terminal state; the CLI's progress bar listens.
page_finished = Signal()
# Sent (job_id=...) when a job reaches done, failed or cancelled; webhooks listen. Receivers run
# inside the caller's transaction, so they enqueue with on_commit.
job_finished = Signal()


def start_job(job_id) -> bool:
    now = timezone.now()
    return bool(
        Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
            status=Job.Status.RUNNING, started_at=now, updated_at=now
        )
    )


def fail_job(job_id, code: str, message: str) -> bool:
    now = timezone.now()
    won = Job.objects.filter(pk=job_id, status__in=Job.ACTIVE).update(
        status=Job.Status.FAILED, error_code=code, error_message=message[:2000], finished_at=now, updated_at=now
    )
    if won:
        log.warning("job failed", extra={"job_id": str(job_id), "error_code": code})
        job_finished.send(sender=Job, job_id=job_id)
    return bool(won)


def finish_job(job_id, markdown_name: str, json_name: str) -> bool:
    now = timezone.now()
    won = Job.objects.filter(pk=job_id, status=Job.Status.ASSEMBLING).update(
        status=Job.Status.DONE,
        result_markdown=markdown_name,
        result_json=json_name,
        finished_at=now,
        updated_at=now,
    )
    if won:
        job_finished.send(sender=Job, job_id=job_id)
    return bool(won)


# --- page transitions --------------------------------------------------------------------------


def claim_pages(page_ids: Iterable[int], move: PageMove) -> list[int]:
    """Claim each page of a running job that is still in ``move.frm``; returns the ids won.

    Each claim counts an attempt on the page row, so redeliveries and sweeps cannot retry a page
    forever (``workers.retry`` reads the count)."""
    won = []
    for page_id in page_ids:
        now = timezone.now()
        if Page.objects.filter(pk=page_id, status=move.frm, job__status=Job.Status.RUNNING).update(
            status=move.to, claimed_at=now, updated_at=now, attempts=F("attempts") + 1
        ):
            won.append(page_id)
    return won


def release_pages(page_ids: Iterable[int], claimed: PageStatus, *, refund: bool = False) -> list[int]:
    """Hand claimed pages back to waiting; returns the ids that were still claimed. ``refund``
    gives back the attempt the claim counted: the worker stopped before it tried (a shutdown)."""
    move = RELEASE[claimed]
    ids = list(page_ids)
    fields = {"attempts": Greatest(F("attempts") - 1, 0)} if refund else {}
    with transaction.atomic():
        back = list(Page.objects.select_for_update().filter(pk__in=ids, status=move.frm).values_list("pk", flat=True))
        Page.objects.filter(pk__in=back).update(status=move.to, updated_at=timezone.now(), **fields)
    return back


def move_page(page_id: int, move: PageMove, **fields) -> bool:
    won = bool(
        Page.objects.filter(pk=page_id, status=move.frm).update(status=move.to, updated_at=timezone.now(), **fields)
    )
    if not won:
        # A duplicate delivery, or a worker whose claim went stale and was handed on (one cut off
        # from the database while it held it): its late write is refused here. The chaos
        # harness counts these lines.
        log.info("claim lost: page %s is no longer %s; write refused", page_id, move.frm, extra={"page_id": page_id})
    return won


@dataclass(frozen=True)
class PageFinished:
    job_id: object
    # This page was the job's last and none failed: assembly is sent once the caller commits.
    job_ready: bool


def flag_job(job_id, flags: Iterable[str]) -> None:
    """Add what a page gave up (``Page.flags``) to its job's flags, each once."""
    flags = list(flags)
    if not flags:
        return
    with transaction.atomic():
        held = Job.objects.select_for_update().values_list("flags", flat=True).filter(pk=job_id).first()
        if held is None:
            return
        merged = list(dict.fromkeys([*held, *flags]))
        if merged != held:
            Job.objects.filter(pk=job_id).update(flags=merged, updated_at=timezone.now())


def finish_page(page_id: int, move: PageMove, *, error: tuple[str, str] | None = None, **fields) -> PageFinished | None:
    """Apply a terminal ``move``, count it on the job once, and decide whether the job is over.

    None when the move lost (the page was no longer in ``move.frm``). The count and the page's
    status change commit together, so a crash cannot count a page twice or lose it; the
    conditional update that brings done+failed up to page_count is the one that ends the job
    (fan-in without a chord): to ASSEMBLING when no page failed, with assembly sent after the
    caller's commit (here, so no stage can forget it and leave the job to the sweep), else to
    FAILED.
    """
    if move.to not in PAGE_TERMINAL or (move.to == PageStatus.FAILED) != bool(error):
        raise ValueError(f"{move.name} is not a terminal move for {'a failure' if error else 'a success'}")
    if error:
        fields.update(error_code=error[0], error_message=error[1][:2000])
    with transaction.atomic():
        if not move_page(page_id, move, **fields):
            return None
        job_id = Page.objects.values_list("job_id", flat=True).get(pk=page_id)
        counter = "pages_failed" if error else "pages_done"
        Job.objects.filter(pk=job_id).update(**{counter: F(counter) + 1}, updated_at=timezone.now())
        complete = Q(pk=job_id, status=Job.Status.RUNNING) & Q(pages_done__gte=F("page_count") - F("pages_failed"))
        ready = bool(
            Job.objects.filter(complete, pages_failed=0).update(status=Job.Status.ASSEMBLING, updated_at=timezone.now())
        )
        if not ready and Job.objects.filter(complete, pages_failed__gt=0).exists():
            _fail_from_pages(job_id)
    page_finished.send(sender=Page, page_id=page_id, job_id=job_id, failed=bool(error))
    if ready:
        transaction.on_commit(lambda: enqueue.assemble(job_id))
    return PageFinished(job_id=job_id, job_ready=ready)


def _fail_from_pages(job_id) -> None:
    failed = Page.objects.filter(job_id=job_id, status=PageStatus.FAILED).order_by("index")
    first = failed.first()
    if first is None:
        return
    pages = ", ".join(str(p.index + 1) for p in failed[:20])
    fail_job(
        job_id,
        first.error_code or ErrorCode.PAGE_FAILED,
        f"{failed.count()} page(s) failed ({pages}): {first.error_message}",
    )


# --- deliveries of the job-wide stages ------------------------------------------------------------
# A worker can die in ingest or assembly (the pod's memory limit, a hard time limit, a crash in a
# library): the message comes back (acks_late + reject_on_worker_lost) and would come back forever.
# So each delivery claims an attempt on the job row by compare-and-set, as page stages do on
# theirs (``claim_pages``), and the delivery (or the sweep) that finds them spent fails the job
# with ``job:stalled``.

# The job's attempt counter for each job-wide stage.
STAGE_ATTEMPTS = {"ingest": "ingest_attempts", "assembly": "assembly_attempts"}


def max_attempts() -> int:
    return max(1, settings.OCR_MAX_ATTEMPTS)


def claim_attempt(job_id, stage: str) -> bool:
    """Count one more delivery of ``stage`` on the job; False, with the job failed, once spent."""
    field = STAGE_ATTEMPTS[stage]
    cap = max_attempts()
    if Job.objects.filter(pk=job_id, **{f"{field}__lt": cap}).update(**{field: F(field) + 1}):
        return True
    fail_stalled(job_id, stage)
    return False


def within_attempts(job_ids: Sequence, stage: str) -> list:
    """The jobs of ``job_ids`` that may have ``stage`` again; the others are failed as stalled."""
    field = STAGE_ATTEMPTS[stage]
    spent = set(Job.objects.filter(pk__in=job_ids, **{f"{field}__gte": max_attempts()}).values_list("pk", flat=True))
    for job_id in spent:
        fail_stalled(job_id, stage)
    return [job_id for job_id in job_ids if job_id not in spent]


def fail_stalled(job_id, stage: str) -> None:
    cap = max_attempts()
    fail_job(job_id, ErrorCode.JOB_STALLED, f"{stage} did not finish in {cap} attempts (each died or hung)")
