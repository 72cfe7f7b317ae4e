"""Holding and inspecting the real Redis queues from a test.

Tests that need a message to sit in a queue (to deliver it twice, to cancel a job before a
worker sees it, to play a worker that died) pause the running workers' consumers with Celery's
own remote control (``cancel_consumer`` / ``add_consumer``) instead of stopping processes: the
same workers then resume and do the work, and no message is lost or consumed behind our back.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis
from celery import Celery

QUEUES = ("cpu", "layout", "ocr", "webhooks")
# The tenants' lanes in front of the queues (apps.jobs.lanes): what a token takes.
LANE_KEYS = ("lane:*", "lanes:*", "inflight:*")


def clear_lanes(client) -> None:
    for pattern in LANE_KEYS:
        for key in client.scan_iter(pattern):
            client.delete(key)


# kombu's Redis transport keeps delivered-but-unacknowledged messages here (acks_late).
UNACKED_KEY = "unacked"


class Broker:
    def __init__(self, app: Celery, client: redis.Redis) -> None:
        self.app = app
        self.redis = client

    def lengths(self) -> dict[str, int]:
        return {q: int(self.redis.llen(q)) for q in QUEUES}

    def unacked(self) -> int:
        return int(self.redis.hlen(UNACKED_KEY))

    def wait_for(self, predicate, timeout: float = 60, what: str = "condition", poll: float = 0.1) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(poll)
        raise AssertionError(
            f"timed out after {timeout}s waiting for {what}; queues {self.lengths()}, unacked {self.unacked()}"
        )

    def drained(self, *queues: str) -> bool:
        """``queues`` (default: all) empty and no message held by a worker, three polls running:
        a message popped but not yet recorded as unacknowledged is in neither place for an
        instant, so one look is not enough."""
        for _ in range(3):
            lengths = self.lengths()
            if any(lengths[q] for q in queues or QUEUES) or self.unacked():
                return False
            time.sleep(0.1)
        return True

    def wait_idle(self, *queues: str, timeout: float = 120) -> None:
        """Everything sent to ``queues`` (default: all) has been done."""
        self.wait_for(lambda: self.drained(*queues), timeout, f"idle queues {queues or QUEUES}")

    def consumers(self, timeout: float = 20) -> dict[str, set[str]]:
        """Worker name → queues it consumes now, as the workers themselves report. A test that
        pauses consumers has a worker running, so no answer at all is an error, not "none"."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            replies = self.app.control.inspect(timeout=2).active_queues()
            if replies:
                return {name: {q["name"] for q in queues} for name, queues in replies.items()}
        raise AssertionError("no worker answered Celery's remote control (inspect active_queues)")

    @contextmanager
    def paused(self, *queues: str, keep: tuple[str, ...] = ()) -> Iterator[Pause]:
        """Stop every running worker (except those named in ``keep``) consuming ``queues``;
        ``resume(queue)`` gives one back early, and on exit each worker gets back exactly the
        queues it had."""
        wanted = set(queues or QUEUES)
        pause = Pause(self.app)
        # Every queue asked to stop is given back, even when pausing itself fails part-way (a
        # reply lost, a check that fails): otherwise the shared worker stays deaf to its queues
        # and every later test that needs it fails too.
        try:
            for name, consumed in self.consumers().items():
                if name in keep:
                    continue
                for queue in consumed & wanted:
                    pause.taken.setdefault(queue, set()).add(name)
                    replies = self.app.control.cancel_consumer(queue, destination=[name], reply=True, timeout=5)
                    if not replies:
                        raise AssertionError(f"{name} did not confirm it stopped consuming {queue}")
            # A worker can still list a queue just after confirming its cancel (seen once in CI:
            # the celery-batches layout worker): ask again until none does, within a bound.
            deadline = time.monotonic() + 15
            while left := {n: q & wanted for n, q in self.consumers().items() if n not in keep and q & wanted}:
                if time.monotonic() > deadline:
                    raise AssertionError(f"workers still consume paused queues: {left}")
                for name, consumed in left.items():
                    for queue in consumed:
                        pause.taken.setdefault(queue, set()).add(name)
                        self.app.control.cancel_consumer(queue, destination=[name], reply=True, timeout=5)
                time.sleep(0.5)
            yield pause
        finally:
            for queue in list(pause.taken):
                pause.resume(queue)


class Pause:
    def __init__(self, app: Celery) -> None:
        self.app = app
        self.taken: dict[str, set[str]] = {}

    def resume(self, queue: str) -> None:
        for name in self.taken.pop(queue, set()):
            self.app.control.add_consumer(queue, destination=[name], reply=True, timeout=5)
