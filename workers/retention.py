"""The retention purge and the upload sweep [queue: cpu, every OCR_PURGE_EVERY s from beat].

Payloads and results of finished jobs older than OCR_RETENTION_DAYS are deleted; rows and
timelines stay (``services.purge``). Direct uploads no job took lose their object
(``direct_uploads.discard_unused``); the slot rows stay. Not retried: the next beat is their retry.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings

from apps.jobs import direct_uploads, services
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


@app.task(base=PipelineTask, name=TaskName.DISCARD_UPLOADS.value, max_retries=0)
def discard_uploads() -> dict:
    """Beat: delete the objects of direct uploads refused or left unused, OCR_PURGE_BATCH per run."""
    done = direct_uploads.discard_unused(
        keep_unused=timedelta(seconds=settings.OCR_UPLOAD_KEEP_UNUSED_SECONDS), batch=settings.OCR_PURGE_BATCH
    )
    log.info("upload sweep", extra={"deleted": done.uploads, "left": done.left})
    return {"deleted": done.uploads, "left": done.left}
