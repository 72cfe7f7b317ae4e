"""Every status change of Job and Page, each a compare-and-set, plus submit/cancel/retry.

The moves themselves are declared in ``apps.jobs.states``; a function here applies one and
returns whether it won. The loser does nothing more, so a message delivered twice, or a retry
racing a sweep, cannot double-count or double-finish. What runs next is the caller's choice:
the stage modules in ``workers`` enqueue the next stage; operator actions enqueue by task name.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import BinaryIO

import redis
from django.conf import settings
from django.core.files.base import ContentFile, File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.dispatch import Signal
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from apps.jobs import enqueue, page_ranges
from apps.jobs.documents import InputError, Probe, probe
from apps.jobs.models import Job, Page, Region, StageEvent
from apps.jobs.states import PAGE_TERMINAL, RELEASE, PageMove, PageStatus
from ocrsite.vocabulary import ErrorCode

log = logging.getLogger(__name__)

# Sent after a page reaches a terminal state; the CLI's progress bar listens.
page_finished = Signal()
# Sent (job_id=...) when a job reaches done, failed or cancelled; webhooks listen. Receivers run
# inside the caller's transaction, so they enqueue with on_commit.
job_finished = Signal()

WORKER = f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Upload:
    stream: BinaryIO
    filename: str
    size: int


@dataclass(frozen=True)
class Limits:
    """What one document may be, for the tenant submitting it (``apps.api.limits`` decides)."""

    max_bytes: int
    max_pages: int


def default_limits() -> Limits:
    return Limits(max_bytes=settings.OCR_MAX_UPLOAD_BYTES, max_pages=settings.OCR_MAX_PAGES)


# --- submit / cancel / retry ------------------------------------------------------------------


def submit(
    upload: Upload,
    *,
    owner=None,
    tenant: str = "",
    engine: str | None = None,
    options: dict | None = None,
    idempotency_key: str = "",
    admit: Callable[[Probe], Callable[[], None] | None] | None = None,
    limits: Limits | None = None,
) -> Job:
    """Probe, store and queue a document. Raises ``InputError`` for anything we refuse.

    ``admit(probe)`` runs after the probe and before anything is stored: the caller's quotas and
    backpressure. It raises to refuse, and may return an undo for its charge, called when no job
    is created after all. With an ``idempotency_key``, the tenant's job under that key from the
    last OCR_IDEMPOTENCY_HOURS is returned instead (``job.replayed`` is True); the same key with a
    different file raises ``IdempotencyConflict``.
    """
    limits = limits or default_limits()
    if upload.size > limits.max_bytes:
        raise InputError(ErrorCode.INPUT_TOO_LARGE, f"{upload.size} bytes; the limit is {limits.max_bytes}")
    found = probe(upload.stream, max_pages=limits.max_pages, max_pixels=settings.OCR_MAX_IMAGE_PIXELS)
    upload.stream.seek(0)
    digest = hashlib.sha256()
    for chunk in iter(lambda: upload.stream.read(1 << 20), b""):
        digest.update(chunk)
    upload.stream.seek(0)
    if idempotency_key and (earlier := idempotent_job(tenant, idempotency_key, digest.hexdigest())):
        return earlier
    found = select_pages(found, options)
    undo = admit(found) if admit else None

    job = Job(
        owner=owner,
        tenant=tenant,
        engine=engine or settings.OCR_ENGINE,
        options=options or {},
        idempotency_key=idempotency_key,
        filename=clean_filename(upload.filename),
        kind=found.kind,
        sha256=digest.hexdigest(),
        size_bytes=upload.size,
        page_count=found.page_count,
    )
    # The stored name is ours: the client's filename never reaches a path.
    job.source.save(f"{job.pk}.{found.kind}", File(upload.stream), save=False)
    try:
        with transaction.atomic():
            job.save()
            transaction.on_commit(lambda: send_ingest(job.pk))
    except IntegrityError:
        # Only the (tenant, idempotency_key) constraint can fail here: a concurrent request with
        # the same key inserted first. Its job is the answer; ours leaves nothing behind.
        default_storage.delete(job.source.name)
        if undo:
            undo()
        if idempotency_key and (earlier := idempotent_job(tenant, idempotency_key, job.sha256)):
            return earlier
        raise
    log.info("job submitted", extra={"job_id": str(job.pk), "pages": found.page_count})
    return job


def select_pages(found: Probe, options: dict | None) -> Probe:
    """The probe narrowed to the job's ``pages`` option: page_count becomes the pages to do."""
    spec = (options or {}).get("pages")
    if not spec:
        return found
    return Probe(kind=found.kind, page_count=len(page_ranges.select(spec, found.page_count)))


def send_ingest(job_id) -> None:
    """After the commit the job is accepted for good: a broker that fails now must not turn the
    answer into an error. The queued row is the record; the sweep sends its ingest once the row
    is OCR_STALE_AFTER old."""
    try:
        enqueue.ingest(job_id)
    except (BrokerError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        log.warning("job accepted but its ingest could not be sent (%s); the sweep will send it", exc)


class IdempotencyConflict(InputError):
    def __init__(self, key: str) -> None:
        super().__init__(
            ErrorCode.IDEMPOTENCY_CONFLICT, f"Idempotency-Key {key[:80]!r} was already used for a different file"
        )


def idempotent_job(tenant: str, key: str, sha256: str) -> Job | None:
    """The tenant's job under ``key`` if it is recent; a key past the window is released first.

    The unique constraint holds across all time, so a key older than OCR_IDEMPOTENCY_HOURS is
    cleared from its old job (a conditional UPDATE) before the key may name a new one.
    """
    cutoff = timezone.now() - timedelta(hours=settings.OCR_IDEMPOTENCY_HOURS)
    Job.objects.filter(tenant=tenant, idempotency_key=key, created_at__lt=cutoff).update(idempotency_key="")
    job = Job.objects.filter(tenant=tenant, idempotency_key=key).first()
    if job is None:
        return None
    if job.sha256 != sha256:
        raise IdempotencyConflict(key)
    job.replayed = True
    return job


def clean_filename(name: str) -> str:
    """The client's name for display only: no directories, no control characters, bounded."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if ch.isprintable())
    return name.strip()[:255]


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
            after = lambda: enqueue.ingest(job.pk)  # noqa: E731
        else:
            reset_pages(failed, now)
            job.status = Job.Status.RUNNING
            after = lambda: enqueue.detect_layout(failed)  # noqa: E731
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
        job.status = Job.Status.QUEUED
        job.attempt += 1
        job.pages_done = job.pages_failed = 0
        job.error_code = job.error_message = ""
        job.started_at = job.finished_at = None
        job.result_markdown = job.result_json = ""
        job.save()
        record(job.pk, "rerun", started=timezone.now(), actor=actor, detail={"attempt": job.attempt})
        transaction.on_commit(lambda: enqueue.ingest(job.pk))
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
        names = [n for n in (job.source.name, job.result_markdown.name, job.result_json.name, *images) if n]
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
        transaction.on_commit(lambda: _delete_stored(names, job.pk))
    return True


# The timeline's actor for purges made by the retention schedule rather than an operator.
RETENTION_ACTOR = "retention"


@dataclass(frozen=True)
class Purged:
    jobs: int
    # Finished jobs past retention still unpurged after this run (the next run takes them).
    left: int


def purge_expired(*, days: int, batch: int, now: datetime | None = None) -> Purged:
    """Purge up to ``batch`` finished jobs created more than ``days`` days ago, oldest first.

    Active jobs are left alone however old (the sweep's business); a job already purged is never
    picked again, so running this twice, or in two workers at once, purges each job once.
    """
    cutoff = (now or timezone.now()) - timedelta(days=days)
    due = Job.objects.filter(created_at__lt=cutoff, purged_at__isnull=True, status__in=Job.TERMINAL)
    ids = list(due.order_by("created_at").values_list("pk", flat=True)[:batch])
    done = sum(purge(job_id, actor=RETENTION_ACTOR) for job_id in ids)
    return Purged(jobs=done, left=due.count())


def _delete_stored(names: list[str], job_id) -> None:
    for name in names:
        try:
            default_storage.delete(name)
        except Exception:  # storage backends raise their own types (botocore, azure, OSError)
            log.exception("purge could not delete a stored file", extra={"job_id": str(job_id), "file": name})


def reset_pages(page_ids: Iterable[int], now: datetime | None = None) -> None:
    """Back to waiting for layout, with their regions gone (layout will write new ones)."""
    ids = list(page_ids)
    Page.objects.filter(pk__in=ids).update(
        status=PageStatus.QUEUED, error_code="", error_message="", updated_at=now or timezone.now()
    )
    Region.objects.filter(page_id__in=ids).delete()


# --- job transitions ---------------------------------------------------------------------------


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


def release_pages(page_ids: Iterable[int], claimed: PageStatus) -> list[int]:
    """Hand claimed pages back to waiting; returns the ids that were still claimed."""
    move = RELEASE[claimed]
    ids = list(page_ids)
    with transaction.atomic():
        back = list(Page.objects.select_for_update().filter(pk__in=ids, status=move.frm).values_list("pk", flat=True))
        Page.objects.filter(pk__in=back).update(status=move.to, updated_at=timezone.now())
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


# --- timeline ----------------------------------------------------------------------------------


def record(
    job_id,
    stage: str,
    *,
    started: datetime,
    page_id: int | None = None,
    outcome: str = "ok",
    error_code: str = "",
    actor: str = "",
    attempt: int = 1,
    detail: dict | None = None,
) -> None:
    now = timezone.now()
    StageEvent.objects.create(
        job_id=job_id,
        page_id=page_id,
        stage=stage,
        outcome=outcome,
        error_code=error_code,
        actor=actor,
        attempt=attempt,
        worker="" if actor else WORKER,
        detail=detail or {},
        started_at=started,
        finished_at=now,
        duration_ms=max(0, int((now - started).total_seconds() * 1000)),
    )
    extra = {"stage": stage, "outcome": outcome, "attempt": attempt, "job_id": str(job_id)}
    if page_id is not None:
        extra["page_id"] = page_id
    log.log(logging.WARNING if outcome == "failed" else logging.INFO, "%s %s", stage, outcome, extra=extra)


def save_bytes(name: str, data: bytes) -> str:
    """Write to default storage under exactly ``name`` (overwriting), returning the stored name."""
    if default_storage.exists(name):
        default_storage.delete(name)
    return default_storage.save(name, ContentFile(data))
