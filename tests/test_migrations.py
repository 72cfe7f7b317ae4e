"""Data migrations on real rows in PostgreSQL: forwards, and back where the migration can go back."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def _node(suffix: str) -> tuple[str, str]:
    """A jobs migration by what it does, not its number (numbers are re-chained when branches merge)."""
    graph = MigrationExecutor(connection).loader.graph
    [node] = [n for n in graph.nodes if n[0] == "jobs" and n[1].endswith(suffix)]
    return node


def _migrate(target: list[tuple[str, str]]):
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    return executor.loader.project_state(target).apps


@pytest.mark.django_db(transaction=True)
def test_region_task_moves_out_of_flags_and_back():
    """Region.task was a "task:<task>" string inside flags: 0009 moves it into the field, leaves the
    other flags as they were, and its reverse puts it back where the old code reads it."""
    region_task = _node("_region_task")
    [before] = MigrationExecutor(connection).loader.graph.node_map[region_task].parents
    latest = [key for key in MigrationExecutor(connection).loader.graph.leaf_nodes() if key[0] == "jobs"]
    try:
        old = _migrate([before.key])
        Job, Page, Region = (old.get_model("jobs", name) for name in ("Job", "Page", "Region"))
        job = Job.objects.create(status="done", filename="p.pdf", kind="pdf", sha256="3" * 64, page_count=1)
        page = Page.objects.create(job=job, index=0, status="done", width=100, height=100, dpi=72)
        box = {"page": page, "label": "table", "x0": 0, "y0": 0, "x1": 10, "y1": 10}
        tasked = Region.objects.create(order=0, flags=["task:table", "loop-cut"], **box).pk
        plain = Region.objects.create(order=1, flags=["title-demoted"], **box).pk
        bare = Region.objects.create(order=2, flags=[], **box).pk

        Region = _migrate([region_task]).get_model("jobs", "Region")
        rows = {r.pk: (r.task, r.flags) for r in Region.objects.all()}
        assert rows == {tasked: ("table", ["loop-cut"]), plain: ("", ["title-demoted"]), bare: ("", [])}

        Region = _migrate([before.key]).get_model("jobs", "Region")
        rows = {r.pk: r.flags for r in Region.objects.all()}
        assert rows == {tasked: ["task:table", "loop-cut"], plain: ["title-demoted"], bare: []}
    finally:
        _migrate(latest)
