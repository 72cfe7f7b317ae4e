"""Celery tasks: thin adapters from a message (IDs only) to one pipeline function.

Retry policy lives in ``PipelineTask``; queues come from ``CELERY_TASK_ROUTES``. Every task is
safe to run twice: the pipeline functions claim their rows by compare-and-set.
"""

from __future__ import annotations

from celery import Task

from apps.jobs import pipeline
from ocrsite.celery import app
from workers.engines.base import EngineError


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


@app.task(base=PipelineTask, name="workers.detect_layout")
def detect_layout(page_ids: list[int]) -> None:
    """One batched layout pass over up to LAYOUT_BATCH pages."""
    pipeline.detect_layout(page_ids)


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
