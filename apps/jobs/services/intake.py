"""Intake: a document sent with the request, probed, stored and queued as a job, once (``submit``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import BinaryIO

from django.conf import settings
from django.core.files.base import File
from django.core.files.storage import default_storage

from apps.jobs.documents import InputError, probe
from apps.jobs.models import Job
from apps.jobs.services.creation import Admit, JobRequest, Source, create_job
from ocrsite.vocabulary import ErrorCode


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
    admit: Admit | None = None,
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
    found = probe(
        upload.stream,
        max_pages=limits.max_pages,
        max_pixels=settings.OCR_MAX_IMAGE_PIXELS,
        pixels_per_byte=settings.OCR_IMAGE_PIXELS_PER_BYTE,
    )
    upload.stream.seek(0)
    digest = hashlib.sha256()
    for chunk in iter(lambda: upload.stream.read(1 << 20), b""):
        digest.update(chunk)
    upload.stream.seek(0)
    source = Received(clean_filename(upload.filename), digest.hexdigest(), upload.size, found, upload.stream)
    request = JobRequest(owner=owner, tenant=tenant, engine=engine, options=options, idempotency_key=idempotency_key)
    return create_job(request, source, admit=admit)


@dataclass(frozen=True)
class Received(Source):
    """Bytes that came with the request: stored under a name of ours when the job is made."""

    stream: BinaryIO

    def attach(self, job: Job) -> None:
        # The stored name is ours: the client's filename never reaches a path.
        job.source.save(f"{job.pk}.{job.kind}", File(self.stream), save=False)

    def release(self, job: Job) -> None:
        default_storage.delete(job.source.name)


def clean_filename(name: str) -> str:
    """The client's name for display only: no directories, no control characters, bounded."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if ch.isprintable())
    return name.strip()[:255]
