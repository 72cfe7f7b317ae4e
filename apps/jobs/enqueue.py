"""Sending work to the queues, by task name: the web and the admin never import a task.

Routing (task → queue) is ``ocrsite.vocabulary.ROUTES`` through ``CELERY_TASK_ROUTES``. Messages
carry IDs only, never bytes. Callers inside a transaction wrap these in ``on_commit``.

Given the ``tenant`` whose work it is, ingest, layout and recognition go through the tenant's lane
(``apps.jobs.lanes``): the id waits in the lane and the queue gets a token (the task with no id),
which the worker that receives it turns into the fairest next item. Without a tenant, with a
delay (a retry's backoff) or without a Redis broker (the embedded CLI), the id rides the message.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from celery import current_app
from django.conf import settings

from apps.jobs import lanes
from ocrsite.vocabulary import PIPELINE_TASKS, Queue, TaskName

# The lane the pipeline's messages go to from here: None (each task's route: the online lane) or
# Queue.BULK. A stage delivered from the bulk queue runs inside ``lane(BULK)`` (workers.retry's
# PipelineTask), so everything it sends for its job stays on the bulk lane; the sweep and the
# operator's actions choose by the job's batch. (Not to be confused with the tenants' lanes,
# ``apps.jobs.lanes``, which order the online lane's work among tenants.)
_LANE: ContextVar[Queue | None] = ContextVar("lane", default=None)


@contextmanager
def lane(queue: Queue | None) -> Iterator[None]:
    token = _LANE.set(queue)
    try:
        yield
    finally:
        _LANE.reset(token)


def lane_of(*, bulk: bool) -> Queue | None:
    return Queue.BULK if bulk else None


# The lane stage of each task that has lanes.
LANE_OF = {TaskName.INGEST: "ingest", TaskName.DETECT_LAYOUT: "layout", TaskName.RECOGNIZE: "recognize"}


def send(name: TaskName, *args: object, countdown: float | None = None) -> None:
    # A signature by name resolves to the registered task, so eager mode (manage.py ocr) runs it
    # in-process while a worker deployment puts it on its routed queue (or the bulk lane's).
    queue = _LANE.get() if name in PIPELINE_TASKS else None
    options = {"queue": queue.value} if queue and not current_app.conf.task_always_eager else {}
    current_app.signature(str(name), args=args).apply_async(countdown=countdown, **options)


def _through_lane(name: TaskName, tenant: str | None, items: list, countdown: float | None) -> bool:
    """Items put in the tenant's lane and one token per item sent; False when they go direct.

    The bulk lane's work goes direct: a token on the bulk queue would take the fairest item of
    the shared tenant lanes, which may be an online one (and an online token a batch's)."""
    if tenant is None or countdown is not None or not items or not lanes.enabled() or _LANE.get():
        return False
    lanes.push(LANE_OF[name], tenant, items)
    for _ in items:
        send(name, None)
    return True


def ingest(job_id: object, tenant: str | None = None) -> None:
    if not _through_lane(TaskName.INGEST, tenant, [str(job_id)], None):
        send(TaskName.INGEST, str(job_id))


def detect_layout(page_ids: Iterable[int], countdown: float | None = None, tenant: str | None = None) -> None:
    """One message per page: the layout worker's collector (workers.batching) merges pages from
    any jobs into passes of up to OCR_LAYOUT_BATCH within OCR_BATCH_WINDOW_MS, so a batch is
    counted in pages whatever the jobs' sizes. Eager mode (manage.py ocr) has no collector, so
    there the pages go in slices of OCR_LAYOUT_BATCH, one pass each.
    """
    ids = [int(i) for i in page_ids]
    if _through_lane(TaskName.DETECT_LAYOUT, tenant, ids, countdown):
        return
    size = max(1, settings.OCR_LAYOUT_BATCH) if current_app.conf.task_always_eager else 1
    for start in range(0, len(ids), size):
        send(TaskName.DETECT_LAYOUT, ids[start : start + size], countdown=countdown)


def recognize(page_ids: Iterable[int], countdown: float | None = None, tenant: str | None = None) -> None:
    ids = [int(i) for i in page_ids]
    if _through_lane(TaskName.RECOGNIZE, tenant, ids, countdown):
        return
    for page_id in ids:
        send(TaskName.RECOGNIZE, int(page_id), countdown=countdown)


def assemble(job_id: object) -> None:
    send(TaskName.ASSEMBLE, str(job_id))
