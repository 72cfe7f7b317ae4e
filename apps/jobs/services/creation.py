"""Job creation: one path from a probed document to a queued job (``create_job``).

Every way a document arrives (a multipart upload, an object a client sent straight to storage)
ends here, so the idempotency replay, the caller's admission, the insert and the ingest sent after
commit happen in one order and are undone the same way when the job is not made after all. What
differs between the ways is where the bytes are: a ``Source`` says that.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from apps.jobs import enqueue, page_ranges
from apps.jobs.documents import Probe
from apps.jobs.models import Job
from apps.jobs.services import result_cache
from apps.jobs.services.idempotency import idempotent_job
from apps.jobs.services.timeline import record
from apps.jobs.services.transitions import job_finished
from ocrsite import telemetry

log = logging.getLogger(__name__)

# The caller's quotas and backpressure: raises to refuse, may return an undo for its charge.
Admit = Callable[[Probe], Callable[[], None] | None]


@dataclass(frozen=True)
class JobRequest:
    """What the client asked for, whatever way its document came."""

    owner: object = None
    tenant: str = ""
    engine: str | None = None
    options: dict | None = None
    idempotency_key: str = ""
    # A batch's item: the job runs on the bulk lane (apps.jobs.batches).
    batch: object = None
    batch_item: str = ""


@dataclass(frozen=True)
class Source:
    """A probed document's bytes, and what making a job of them does to them.

    Each way a document arrives is a subclass: ``attach`` says where the bytes are (storing them
    if need be) and, where someone else may take the same bytes meanwhile, ``claim`` and ``taken``
    decide which job they belong to.
    """

    filename: str
    sha256: str
    size_bytes: int
    probe: Probe

    def attach(self, job: Job) -> None:
        """Point ``job.source`` at the bytes (storing them if need be), before the insert."""
        raise NotImplementedError

    def claim(self, job: Job) -> bool:
        """Inside the job's transaction: take the bytes for ``job``; False when another took them."""
        return True

    def release(self, job: Job) -> None:
        """No job was made after all: undo what ``attach`` stored."""

    def taken(self) -> Job:
        """The answer when ``claim`` lost: the job that took the bytes (or a refusal, raised)."""
        raise NotImplementedError


def create_job(request: JobRequest, source: Source, *, admit: Admit | None = None) -> Job:
    """The job for ``source``'s bytes, queued for ingest once committed.

    With an idempotency key, the tenant's recent job for the same bytes is the answer
    (``job.replayed``); the same key with other bytes raises ``IdempotencyConflict``.
    ``admit(probe)`` runs before anything is written and its undo runs if no job is made.
    """
    key = request.idempotency_key
    if key and (earlier := idempotent_job(request.tenant, key, source.sha256)):
        return earlier
    found = select_pages(source.probe, request.options)
    undo = admit(found) if admit else None
    job = Job(
        owner=request.owner,
        tenant=request.tenant,
        engine=request.engine or settings.OCR_ENGINE,
        options=request.options or {},
        idempotency_key=key,
        filename=source.filename,
        kind=found.kind,
        sha256=source.sha256,
        size_bytes=source.size_bytes,
        page_count=found.page_count,
        batch=request.batch,
        batch_item=request.batch_item,
        traceparent=telemetry.current_traceparent(),
    )
    source.attach(job)
    result_cache.prepare(job, page_count=found.page_count)
    try:
        with transaction.atomic():
            cached = result_cache.answer_from_cache(job)
            job.save()
            claimed = source.claim(job)
            if claimed:
                start_or_finish(job, cached)
            else:
                transaction.set_rollback(True)
    except IntegrityError:
        # The (tenant, idempotency_key) constraint: a concurrent request with the same key
        # inserted first. Its job is the answer; ours leaves nothing behind. (A batch's item made
        # twice at once fails on (batch, batch_item) and re-raises for the expansion to skip.)
        source.release(job)
        if undo:
            undo()
        if key and (earlier := idempotent_job(request.tenant, key, source.sha256)):
            return earlier
        raise
    if not claimed:
        source.release(job)
        if undo:
            undo()
        return source.taken()
    if cached and undo:
        undo()  # nothing will be read: the tenant's page quota and the backlog are not charged
    log.info(
        "job submitted",
        extra={"job_id": str(job.pk), "pages": found.page_count, "source": type(source).__name__, "cached": cached},
    )
    return job


def start_or_finish(job: Job, cached: bool) -> None:
    """After a new job's row is written, in its transaction: ingest once it commits, or, for a
    job answered from the result cache, its timeline line and the finished signal (webhooks)."""
    if not cached:
        transaction.on_commit(lambda: send_ingest(job.pk, job.tenant))
        return
    record(job.pk, "cache", started=timezone.now(), detail={"from": str(job.cached_from_id), "pages": job.page_count})
    job_finished.send(sender=Job, job_id=job.pk)


def select_pages(found: Probe, options: dict | None) -> Probe:
    """The probe narrowed to the job's ``pages`` option: page_count becomes the pages to do."""
    spec = (options or {}).get("pages")
    if not spec:
        return found
    return Probe(kind=found.kind, page_count=len(page_ranges.select(spec, found.page_count)))


def send_ingest(job_id, tenant: str | None = None) -> None:
    """After the commit the job is accepted for good: a broker that fails now must not turn the
    answer into an error. The queued row is the record; the sweep sends its ingest once the row
    is OCR_STALE_AFTER old."""
    try:
        enqueue.ingest(job_id, tenant)
    except (BrokerError, redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        log.warning("job accepted but its ingest could not be sent (%s); the sweep will send it", exc)
