"""A CPU worker process builds each engine once, and its memory does not grow across pages.

A real Celery worker (prefork, one pool process, the product's settings) OCRs two real scans
again and again; the pool process's resident memory is read from /proc after each job. Figures
for many pages and for the embedded CLI are the memory benchmark's (``make bench
BENCH_ARGS=memory``); this test is the bounded check that runs in ``make test``.
"""

from __future__ import annotations

import contextlib
import io
import re
import time

import psutil
import pytest

from apps.jobs import services
from apps.jobs.models import Job
from ocrsite.celery import app as celery_app
from tests.support.documents import dev_file
from tests.support.queues import Broker

ROUNDS = 5
# Resident memory moves by a few MB between identical jobs (Python's and glibc's free lists);
# an engine rebuilt per page, or state kept per page, adds tens of MB a page.
SLACK_MB = 25


def _ocr(data: bytes, name: str, timeout: float = 240) -> Job:
    job = services.submit(services.Upload(io.BytesIO(data), name, len(data)), tenant="memory")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status in (Job.Status.DONE, Job.Status.FAILED):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job {job.pk} ({name}) not finished in {timeout} s")


@pytest.mark.django_db(transaction=True)
def test_a_worker_builds_each_engine_once_and_its_memory_stays_flat(start_worker, redis_client):
    docs = [(p.name, p.read_bytes()) for p in (dev_file("phototest.tif"), dev_file("scanned_ocr_test.pdf"))]
    # Only this test's worker may take its pages: a worker already running (the session's shared
    # one) pauses; with none running there is nothing to pause.
    running = celery_app.control.inspect(timeout=3).active_queues()
    with Broker(celery_app, redis_client).paused() if running else contextlib.nullcontext():
        worker = start_worker(concurrency=1, name="memory")
        try:
            pool = psutil.Process(worker.proc.pid).children()
            assert len(pool) == 1, pool
            rss_mb = []
            for _round in range(ROUNDS):
                for name, data in docs:
                    job = _ocr(data, name)
                    assert job.status == Job.Status.DONE, (job.error_code, worker.tail())
                rss_mb.append(pool[0].memory_info().rss / 2**20)
            log = worker.log.read_text()
        finally:
            worker.stop()
    # The same pool process ran every page (none replaced), and it built each engine once.
    assert len(re.findall(r"CPU layout engine ready", log)) == 1, log[-3000:]
    # Recognizers: the page's, and the orientation check's reader (another model set); each once.
    recognizers = re.findall(r"CPU recognizer: (.+); models load on first use", log)
    assert recognizers and len(recognizers) == len(set(recognizers)), log[-3000:]
    assert "exceeding memory limit" not in log
    # After the first round (engines built, every input shape of these pages seen once), more of
    # the same pages leave the process's memory where it was.
    assert rss_mb[-1] <= rss_mb[0] + SLACK_MB, f"RSS MB after each round: {[round(r) for r in rss_mb]}"
