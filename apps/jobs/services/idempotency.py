"""Idempotency keys: a tenant's retried submission gets its first job back, not a second one."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from apps.jobs.documents import InputError
from apps.jobs.models import Job
from ocrsite.vocabulary import ErrorCode


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
