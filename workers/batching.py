"""The layout collector: pages from any jobs merged into one forward pass.

Built on celery-batches: messages for the batched task are buffered in the worker's consumer
and flushed to the pool when ``flush_every`` messages have arrived or the first of them has
waited ``window_s``, whichever is first. One message carries one page (``apps.jobs.enqueue``
sends them that way), so a pass is at most OCR_LAYOUT_BATCH pages, and a page that arrives alone
waits OCR_BATCH_WINDOW_MS (plus one timer tick, a tenth of that) before its pass starts.

Why celery-batches rather than our own consumer: it keeps Celery's delivery guarantees. With
``acks_late`` the buffered messages stay unacknowledged until the batch has run, so a worker
that dies mid-batch has its pages delivered again (and the pipeline's compare-and-set claim
keeps a redelivery harmless). Three things it leaves to us, handled here:

- Prefetch. Unacked messages count against the consumer's prefetch limit, and the platform
  runs GPU queues with ``prefetch_multiplier=1``: a one-process layout worker would only ever
  hold one message, i.e. batches of one. ``Strategy`` raises the consumer's prefetch to two
  batches, so the next batch fills while the current one runs on the GPU.
- Retries. A batch task has no per-message ``retry``; the layout stage hands the claims of a
  transient failure back and re-sends those pages itself (``workers.retry``'s policy; attempts
  are counted on the page rows, so this cannot loop forever).
- A pass that never returns. celery-batches acknowledges a batch's messages only when its pass
  returns; when the pool process running it dies (OOM killer, SIGKILL, a segfault in an engine)
  nothing acknowledges them, and each such batch keeps its messages counted against the
  consumer's prefetch window for the worker's life. Two of them and a one-process layout worker
  takes no message again: every page sent to it waits forever (seen in the fault tests). Here a
  pass that fails rejects its messages; the pages it had claimed are handed back and sent again
  by the sweep once their claim is stale (a redelivery now would find them still claimed).

The batch runs in the pool without Celery's per-task time limits (celery-batches calls the
pool directly); the sweep's stale-claim rule is the backstop for a hung pass.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable, Sequence
from queue import Queue
from typing import Any

from celery_batches import Batches, SimpleRequest
from celery_batches.trace import apply_batches_task

log = logging.getLogger(__name__)


class _StampedQueue(Queue):
    """The consumer's buffer, remembering when its oldest message arrived (under its lock)."""

    def _init(self, maxsize: int) -> None:
        super()._init(maxsize)
        self.first_at: float | None = None

    def _put(self, item: Any) -> None:
        if not self.queue:
            self.first_at = time.monotonic()
        super()._put(item)

    def _get(self) -> Any:
        item = super()._get()
        if not self.queue:
            self.first_at = None
        return item


class Collector(Batches):
    """Base for batched tasks: set ``flush_every`` (pages) and ``window_s``, and ``run``.

    celery-batches' own timer flushes every ``flush_interval`` whatever the buffer holds, so a
    batch that started filling just before a tick leaves half empty. Here the timer only ticks
    (every window/10) and a flush happens when the batch is full or its *first* message has
    waited ``window_s``: under a burst batches leave full, and a lone page waits the window
    (plus at most one tick).
    """

    abstract = True
    acks_late = True  # always: flush() acknowledges a pass's messages once it returns
    ignore_result = True
    window_s = 0.1
    # Batches of this many consumed while the next fills: prefetch = prefetch_depth × flush_every.
    prefetch_depth = 2

    def __init__(self) -> None:
        super().__init__()
        self._buffer = _StampedQueue()
        self.flush_interval = max(0.002, self.window_s / 10)

    def _do_flush(self) -> None:
        first = self._buffer.first_at
        if first is not None and self._buffer.qsize() < self.flush_every and time.monotonic() - first < self.window_s:
            return  # the window is open and the batch not full yet
        super()._do_flush()

    def flush(self, requests: Sequence[Any]) -> Any:
        """Run a pass in the pool: its messages are acknowledged when it returns and rejected
        when it does not (celery-batches' own flush leaves them unacknowledged then)."""
        requests = list(requests)
        batch = ([SimpleRequest.from_request(r) for r in requests],)

        def returned(_result: Any) -> None:
            for request in requests:
                request.acknowledge()

        def failed(exc: Any) -> None:
            log.warning(
                "%s: a pass over %d messages did not return (%s); their pages go back to the sweep",
                self.name,
                len(requests),
                getattr(exc, "exception", exc),
            )
            for request in requests:
                request.reject(requeue=False)

        return self._pool.apply_async(
            apply_batches_task, (self, batch, 0, None), callback=returned, error_callback=failed
        )

    def Strategy(self, task: Any, app: Any, consumer: Any):
        handler = super().Strategy(task, app, consumer)
        if consumer.initial_prefetch_count:  # 0 means unlimited: nothing to raise
            procs = max(1, getattr(consumer.pool, "num_processes", 1) or 1)
            need = self.prefetch_depth * int(self.flush_every)
            multiplier = max(consumer.prefetch_multiplier, math.ceil(need / procs))
            if multiplier != consumer.prefetch_multiplier:
                # Both: initial_prefetch_count is applied now; prefetch_multiplier is what the
                # consumer restores to after a broker reconnect.
                consumer.prefetch_multiplier = multiplier
                consumer.initial_prefetch_count = max(consumer.initial_prefetch_count, multiplier * procs)
                log.info(
                    "%s: prefetch raised to %d so a batch of %d can fill",
                    self.name,
                    consumer.initial_prefetch_count,
                    self.flush_every,
                )
        return handler


def _first_arg(request: Any) -> Any:
    args = request.args or ()
    return args[0] if args else request.kwargs.get("page_ids", [])


def page_ids_of(requests: Iterable[Any]) -> list[int]:
    """The page ids carried by a flush's requests, first-seen order, duplicates dropped.

    A message is ``detect_layout(page_ids)``; older messages may carry several ids; a token
    (``detect_layout(None)``) carries none (``tokens_of``)."""
    seen: dict[int, None] = {}
    for request in requests:
        ids = _first_arg(request)
        if ids is None:
            continue
        for page_id in ids if isinstance(ids, list | tuple) else [ids]:
            seen.setdefault(int(page_id), None)
    return list(seen)


def tokens_of(requests: Iterable[Any]) -> int:
    """How many of a flush's requests are lane tokens: each takes one page from the lanes."""
    return sum(1 for request in requests if _first_arg(request) is None)


def chunked(ids: Sequence[int], size: int) -> list[list[int]]:
    size = max(1, size)
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)]
