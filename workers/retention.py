"""The retention purge [queue: cpu, every OCR_PURGE_EVERY s from beat].

Payloads and results of finished jobs older than OCR_RETENTION_DAYS are deleted; rows and
timelines stay (``services.purge``). Not retried: the next beat is its retry.
"""

from __future__ import annotations

import logging

from django.conf import settings

from apps.jobs import services
from ocrsite.celery import app
from ocrsite.vocabulary import TaskName
from workers.retry import PipelineTask

log = logging.getLogger(__name__)


@app.task(base=PipelineTask, name=TaskName.PURGE_EXPIRED.value, max_retries=0)
def purge_expired() -> dict:
    """Beat: purge finished jobs past retention, OCR_PURGE_BATCH per run at most.

    A backlog (the first run after enabling retention) drains over several runs rather than in
    one long transaction-heavy task; each run logs how many it purged and how many are left.
    """
    if settings.OCR_RETENTION_DAYS <= 0:
        return {"purged": 0, "left": 0}
    done = services.purge_expired(days=settings.OCR_RETENTION_DAYS, batch=settings.OCR_PURGE_BATCH)
    log.info("retention purge", extra={"purged": done.jobs, "left": done.left})
    return {"purged": done.jobs, "left": done.left}
