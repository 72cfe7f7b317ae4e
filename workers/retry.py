"""The one retry policy: what is worth retrying, how many times, and how long to wait.

Two places apply it, for two kinds of work:

- Page stages (layout, recognition) count attempts on the page row (each claim adds one), so a
  redelivery, a sweep and a retry all draw on the same budget; each stage has its own (layout's
  success sets the count back to zero for recognition). On a transient engine failure the
  stage hands its claim back and sends the page again after ``backoff_s(attempts)``; once the
  budget is spent the page fails with the engine's code. A claim whose worker died is released by
  the sweep, which fails the page as ``page:stalled`` once its attempts are spent (a page that
  kills its worker every time must not loop forever).
- Job stages (ingest, assembly) count their deliveries on the job row (``ingest_attempts``,
  ``assembly_attempts``: ``services.claim_attempt``), so a worker that dies in one every time
  ends the job as ``job:stalled`` instead of looping. ``PipelineTask`` retries a transient
  failure that escapes them through Celery, ``max_attempts`` times in all, with the same backoff;
  after that the job's stale ``updated_at`` brings the sweep back to it, and each re-sent
  delivery draws on the same row counter.
- Beat's own tasks (sweep, retention purge) declare ``max_retries=0`` and are not retried: the
  next beat is their retry, and retried copies would only pile up behind an outage.

The backoff is exponential with full jitter (``ocrsite.backoff``): attempt n waits a
uniform draw from [0, min(cap, base × 2^(n-1))] seconds, so a burst of failures does not come
back as a burst. ``PipelineTask`` keeps its own ``__call__`` rather than Celery's
``autoretry_for``/``retry_backoff``: what is transient depends on the exception's ``permanent``
flag, not its type, and Celery's backoff draws whole seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from celery import Task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from apps.jobs import enqueue
from ocrsite import backoff
from ocrsite.vocabulary import Queue
from workers.engines.base import EngineError

# Failures of the machinery around a stage (broker, database, storage connections), not of the
# document: worth trying again.
_TRANSIENT_TYPES = (ConnectionError, TimeoutError, OperationalError, InterfaceError)


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3
    base_s: float = 2.0
    cap_s: float = 120.0

    def is_transient(self, exc: BaseException) -> bool:
        if isinstance(exc, EngineError):
            return not exc.permanent
        return isinstance(exc, _TRANSIENT_TYPES)

    def should_retry(self, exc: BaseException, attempts: int) -> bool:
        """A transient failure with attempts left (``attempts`` made so far, this one included)."""
        return self.is_transient(exc) and attempts < self.max_attempts

    def backoff_s(self, attempt: int) -> float:
        return backoff.backoff_s(attempt, self.base_s, self.cap_s)


def policy() -> RetryPolicy:
    return RetryPolicy(
        max_attempts=max(1, settings.OCR_MAX_ATTEMPTS),
        base_s=settings.OCR_RETRY_BACKOFF_S,
        cap_s=settings.OCR_RETRY_BACKOFF_MAX_S,
    )


class PipelineTask(Task):
    """Base of every pipeline task: acknowledged after the work (a worker that dies mid-task has
    its message delivered again), no result stored, transient failures retried per the policy."""

    abstract = True
    acks_late = True
    ignore_result = True

    def __call__(self, *args, **kwargs):
        # A message taken from the bulk queue sends what follows on the bulk lane too.
        delivered = (self.request.delivery_info or {}).get("routing_key")
        try:
            with enqueue.lane(Queue.BULK if delivered == Queue.BULK else None):
                return super().__call__(*args, **kwargs)
        except Exception as exc:
            rules = policy()
            if not rules.is_transient(exc) or self.max_retries == 0:
                raise
            attempt = self.request.retries + 1
            raise self.retry(exc=exc, countdown=rules.backoff_s(attempt), max_retries=rules.max_attempts - 1) from exc
