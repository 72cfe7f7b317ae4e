"""Enqueueing, by task name, so services never import the tasks module (tasks import services).

Queues come from ``CELERY_TASK_ROUTES``; this module decides batching and what rides along:
IDs only, never bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from celery import current_app
from django.conf import settings


def _send(name: str, *args: object, countdown: float | None = None) -> None:
    # A signature by name resolves to the registered task, so eager mode (manage.py ocr) runs it
    # in-process while a worker deployment puts it on its routed queue.
    current_app.signature(name, args=args).apply_async(countdown=countdown)


def ingest(job_id: str) -> None:
    _send("workers.ingest", str(job_id))


def detect_layout(page_ids: Iterable[int], countdown: float | None = None) -> None:
    """One message per page: the layout worker's collector (workers.batching) merges pages from
    any jobs into passes of up to LAYOUT_BATCH within OCR_BATCH_WINDOW_MS, so a batch is
    counted in pages whatever the jobs' sizes. Eager mode (manage.py ocr) has no collector, so
    there the pages go in slices of LAYOUT_BATCH, one pass each.
    """
    ids = [int(i) for i in page_ids]
    size = max(1, settings.OCR_LAYOUT_BATCH) if current_app.conf.task_always_eager else 1
    for start in range(0, len(ids), size):
        _send("workers.detect_layout", ids[start : start + size], countdown=countdown)


def recognize(page_ids: Sequence[int]) -> None:
    for page_id in page_ids:
        _send("workers.recognize", int(page_id))


def assemble(job_id: str) -> None:
    _send("workers.assemble", str(job_id))
