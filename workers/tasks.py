"""Celery tasks: thin adapters from a message (IDs only) to one pipeline function.

Retry policy lives in ``PipelineTask``; queues come from ``CELERY_TASK_ROUTES``. Every task is
safe to run twice: the pipeline functions claim their rows by compare-and-set.
"""

from __future__ import annotations

import logging

from celery import Task
from django.conf import settings

from apps.jobs import dispatch, pipeline
from ocrsite.celery import app
from workers import batching
from workers.batching import Collector
from workers.engines.base import EngineError

log = logging.getLogger(__name__)


class PipelineTask(Task):
    """Transient engine errors retry with exponential backoff and jitter; permanent ones never
    reach here (the pipeline fails the page). Messages are acked after the work, so a worker
    that dies mid-task has its message delivered again."""

    autoretry_for = (EngineError, ConnectionError, TimeoutError)
    retry_backoff = 2
    retry_backoff_max = 120
    retry_jitter = True
    max_retries = 5
    acks_late = True
    ignore_result = True


@app.task(base=PipelineTask, name="workers.ingest")
def ingest(job_id: str) -> None:
    """Split a job into pages; text-layer pages finish here, the rest go to ``layout``."""
    pipeline.ingest(job_id)


@app.task(
    base=Collector,
    name="workers.detect_layout",
    flush_every=settings.OCR_LAYOUT_BATCH,
    window_s=settings.OCR_BATCH_WINDOW_MS / 1000,
)
def detect_layout(requests: list) -> None:
    """Pages collected from any jobs (one message each) for at most OCR_BATCH_WINDOW_MS, up to
    OCR_LAYOUT_BATCH of them, in one layout pass. Messages are acked after the pass; a transient
    engine error re-sends the pages with backoff (see workers.batching)."""
    for chunk in batching.chunked(batching.page_ids_of(requests), settings.OCR_LAYOUT_BATCH):
        try:
            pipeline.detect_layout(chunk)
        except (EngineError, ConnectionError, TimeoutError) as exc:
            log.warning("layout pass over %d pages failed (%s); sending them again", len(chunk), exc)
            dispatch.detect_layout(chunk, countdown=batching.backoff_s(1))


@app.task(base=PipelineTask, name="workers.recognize")
def recognize(page_id: int) -> None:
    """Text for every region of one page."""
    pipeline.recognize(page_id)


@app.task(base=PipelineTask, name="workers.assemble")
def assemble(job_id: str) -> None:
    """Markdown + JSON for a job whose pages are all done."""
    pipeline.assemble(job_id)


@app.task(base=PipelineTask, name="workers.sweep", max_retries=0)
def sweep() -> dict:
    """Beat: re-enqueue stale or lost work."""
    return pipeline.sweep()
