"""The layout collector when the pool process running a pass dies.

A real layout worker (one pool process, batches of one page, so its prefetch window is two
messages) runs the real rapid-layout pass; the test SIGKILLs the pool process while a pass is
under way (its page claimed, not yet detected), more times than the window holds, then sends one
more page. celery-batches acknowledges a pass's messages only when it returns, so before the
collector rejected the messages of a pass that never returned, each kill kept one message counted
against the window and the worker never took another: the last page waited forever (the fault
tests caught it as jobs that never finished).
"""

from __future__ import annotations

import psutil
import pytest
from celery import current_app

from apps.jobs import enqueue
from apps.jobs.models import Page
from tests.support.perimeter import queues_held
from tests.support.pipeline_rows import page_with_image, png_of_text
from tests.support.queues import Broker

KILLS = 3  # more than the window of two messages


def status_of(page: Page) -> str:
    return Page.objects.values_list("status", flat=True).get(pk=page.pk)


@pytest.mark.django_db(transaction=True)
def test_a_pass_whose_pool_process_dies_does_not_deafen_the_worker(start_worker, redis_client):
    broker = Broker(current_app, redis_client)
    with queues_held(redis_client):
        worker = start_worker(
            queues="layout",
            concurrency=1,
            env={"OCR_LAYOUT_BATCH": "1", "OCR_BATCH_WINDOW_MS": "10"},
            name="batch-loss",
        )
        try:
            killed = 0
            for _ in range(KILLS * 3):  # a pass can finish before the kill lands: try again
                page = page_with_image(png_of_text())
                enqueue.detect_layout([page.pk])
                # Polled often: the kill must land while the pass runs.
                broker.wait_for(lambda page=page: status_of(page) != "queued", 60, "the claim", poll=0.005)
                for child in psutil.Process(worker.proc.pid).children():
                    if child.status() != psutil.STATUS_ZOMBIE:  # one pool process; a dead one may linger
                        child.kill()
                        child.wait(10)
                if status_of(page) == "detecting":  # killed mid-pass: its message was never acked
                    killed += 1
                if killed == KILLS:
                    break
            assert killed == KILLS, f"only {killed} passes were killed mid-way:\n{worker.tail()}"

            last = page_with_image(png_of_text())
            enqueue.detect_layout([last.pk])
            broker.wait_for(
                lambda: status_of(last) == "detected", 60, f"the page sent after the kills:\n{worker.tail()}"
            )
            assert "did not return" in worker.log.read_text()
        finally:
            worker.stop()
