"""Intake: a document probed, stored and queued as a job, once (``submit``)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO

import redis
from django.conf import settings
from django.core.files.base import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError

from apps.jobs import enqueue, page_ranges
from apps.jobs.documents import InputError, Probe, probe
from apps.jobs.models import Job
from apps.jobs.services import result_cache
from apps.jobs.services.idempotency import idempotent_job
from apps.jobs.services.timeline import record
from apps.jobs.services.transitions import job_finished
from ocrsite import telemetry
from ocrsite.vocabulary import ErrorCode

log = logging.getLogger(__name__)


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
        traceparent=telemetry.current_traceparent(),
    )
    result_cache.prepare(job, page_count=found.page_count)
    # The stored name is ours: the client's filename never reaches a path.
    job.source.save(f"{job.pk}.{found.kind}", File(upload.stream), save=False)
    try:
        with transaction.atomic():
            cached = result_cache.answer_from_cache(job)
            job.save()
            start_or_finish(job, cached)
    except IntegrityError:
        # Only the (tenant, idempotency_key) constraint can fail here: a concurrent request with
        # the same key inserted first. Its job is the answer; ours leaves nothing behind.
        default_storage.delete(job.source.name)
        if undo:
            undo()
        if idempotency_key and (earlier := idempotent_job(tenant, idempotency_key, job.sha256)):
            return earlier
        raise
    if cached and undo:
        undo()  # nothing will be read: the tenant's page quota and the backlog are not charged
    log.info("job submitted", extra={"job_id": str(job.pk), "pages": found.page_count, "cached": cached})
    return job


def start_or_finish(job: Job, cached: bool) -> None:
    """After a new job's row is written, in its transaction: ingest once it commits, or, for a
    job answered from the result cache, its timeline line and the finished signal (webhooks)."""
    if not cached:
        transaction.on_commit(lambda: send_ingest(job.pk))
        return
    now = timezone.now()
    record(job.pk, "cache", started=now, detail={"from": str(job.cached_from_id), "pages": job.page_count})
    job_finished.send(sender=Job, job_id=job.pk)


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


def clean_filename(name: str) -> str:
    """The client's name for display only: no directories, no control characters, bounded."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if ch.isprintable())
    return name.strip()[:255]
