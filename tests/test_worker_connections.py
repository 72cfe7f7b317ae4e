"""A worker keeps its PostgreSQL connections between tasks (settings.CELERY_DB_REUSE_MAX).

Celery's Django fixup otherwise closes every connection before and after each task: a new
backend for each of a one-page job's four tasks (``bench pipeline``: ~4,800 tuples of catalogue
read a job, 736-1,516 with connections kept). A real worker of its own (the shared test worker runs
with DATABASE_CONN_MAX_AGE=0, so the test database can be dropped at the end) runs the sweep
twice; the backend serving it after the first run still serves it after the second.
"""

from __future__ import annotations

import time

import pytest
from django.db import connection

from ocrsite.celery import app
from ocrsite.vocabulary import TaskName

QUEUE = "conn-test"


def _backends() -> dict[int, object]:
    """pid → start time of the sessions the worker under test opened (by application_name)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid, backend_start FROM pg_stat_activity WHERE application_name = %s", [QUEUE])
        return dict(cursor.fetchall())


def _run_sweep(worker, runs: int) -> None:
    app.send_task(TaskName.SWEEP.value, queue=QUEUE)
    deadline = time.monotonic() + 60
    while worker.log.read_text().count(f"Task {TaskName.SWEEP.value}") < 2 * runs:  # received, succeeded
        assert time.monotonic() < deadline, worker.tail()
        time.sleep(0.1)
    time.sleep(0.5)  # past the task's postrun


@pytest.mark.django_db(transaction=True)
def test_the_worker_keeps_its_database_connections_between_tasks(start_worker):
    # libpq names the worker's sessions from PGAPPNAME; the database URL stays the fixture's.
    worker = start_worker(
        queues=QUEUE, concurrency=1, name="connections", env={"PGAPPNAME": QUEUE, "DATABASE_CONN_MAX_AGE": "60"}
    )
    try:
        _run_sweep(worker, 1)
        first = _backends()
        assert first, "the worker's connection did not outlive its task"
        _run_sweep(worker, 2)
        assert _backends() == first, "the second task was served by a new backend"
    finally:
        worker.stop()
