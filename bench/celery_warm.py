"""The product's Celery app, plus a note of which pool process ran which task.

The pipeline benchmark starts its worker with ``-A bench.celery_warm`` so the warm-up can check, not assume, that
every prefork child has run each stage (models loaded, first-call allocations done) before the
clock starts. The tasks, routes and settings are the product's own; the only addition is one
short line appended to BENCH_TASK_LOG per finished task (an O_APPEND write of under 512 bytes,
atomic between processes).
"""

from __future__ import annotations

import os
from pathlib import Path

from celery.signals import task_postrun

from ocrsite.celery import app

__all__ = ["app"]


@task_postrun.connect
def _note(task=None, **_kwargs) -> None:
    path = os.environ.get("BENCH_TASK_LOG")
    if path and task is not None:
        with Path(path).open("a") as fh:
            fh.write(f"{os.getpid()} {task.name}\n")


def ran(path: str) -> dict[int, set[str]]:
    """pid → names of the tasks it finished, from BENCH_TASK_LOG."""
    out: dict[int, set[str]] = {}
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return out
    for line in text.splitlines():
        pid, _, name = line.partition(" ")
        if pid.isdigit():
            out.setdefault(int(pid), set()).add(name)
    return out


def children(pid: int) -> set[int]:
    """The worker's pool processes: its direct children (Linux /proc)."""
    found: set[int] = set()
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            found.update(int(x) for x in (task / "children").read_text().split())
    except OSError:
        pass
    return found
