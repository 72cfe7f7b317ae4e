"""Enqueueing, by task name, so services never import the tasks module (tasks import services).

Queues come from ``CELERY_TASK_ROUTES``; this module decides batching and what rides along:
IDs only, never bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from celery import current_app
from django.conf import settings


def _send(name: str, *args: object) -> None:
    # A signature by name resolves to the registered task, so eager mode (manage.py ocr) runs it
    # in-process while a worker deployment puts it on its routed queue.
    current_app.signature(name, args=args).apply_async()


def ingest(job_id: str) -> None:
    _send("workers.ingest", str(job_id))


def detect_layout(page_ids: Iterable[int]) -> None:
    """One message per LAYOUT_BATCH pages, so a layout worker runs one forward pass per message.

    (Celery's ``chunks`` primitive would call the task once per page inside a chunk, which
    cannot feed a batched model, so the list is sliced here.)
    """
    ids = [int(i) for i in page_ids]
    size = max(1, settings.OCR_LAYOUT_BATCH)
    for start in range(0, len(ids), size):
        _send("workers.detect_layout", ids[start : start + size])


def recognize(page_ids: Sequence[int]) -> None:
    for page_id in page_ids:
        _send("workers.recognize", int(page_id))


def assemble(job_id: str) -> None:
    _send("workers.assemble", str(job_id))
