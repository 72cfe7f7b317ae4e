"""What the run measured and what it must show: the database counted after the run, where
unfinished jobs stand, load and progress lines, and the checks that fail the run."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path

import psycopg
import redis

from tests.chaos.documents import Doc, accepted
from tests.chaos.plan import Size
from tests.chaos.stack import Stack


def load_sampler(stop: threading.Event, out: list[float]) -> None:
    while not stop.wait(5):
        out.append(os.getloadavg()[0])


def progress(stack: Stack, docs: list[Doc], stop: threading.Event, every_s: float = 60) -> None:
    """A line on stderr every ``every_s``: accepted, terminal, load and the queues (long runs)."""
    t0 = time.monotonic()
    while not stop.wait(every_s):
        try:
            client = redis.Redis(port=stack.redis_port, socket_timeout=2)
            queues = {q: client.llen(q) for q in ("cpu", "layout", "ocr", "webhooks")}
        except redis.RedisError:
            queues = {}
        ended = sum(1 for d in docs if d.status)
        print(
            f"chaos: {time.monotonic() - t0:.0f}s accepted {accepted(docs)} ended {ended} of {len(docs)},"
            f" load {os.getloadavg()[0]:.1f}, queued {queues}",
            file=sys.stderr,
            flush=True,
        )


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return ""


def pages_recognised_twice(database_url: str) -> int:
    """Pages with more than one successful recognition: a page finished twice."""
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT count(*) FROM (SELECT page_id FROM jobs_stageevent WHERE stage = 'recognize' AND outcome = 'ok'"
            " GROUP BY page_id HAVING count(*) > 1) d"
        ).fetchone()[0]


def count_rows(database_url: str) -> tuple[int, int, int]:
    with psycopg.connect(database_url) as conn:
        pages = conn.execute("SELECT count(*) FROM jobs_page").fetchone()[0]
        jobs = conn.execute("SELECT count(*) FROM jobs_job").fetchone()[0]
        dups = conn.execute(
            "SELECT count(*) FROM (SELECT job_id, index FROM jobs_page GROUP BY 1, 2 HAVING count(*) > 1) d"
        ).fetchone()[0]
    return pages, jobs, dups


def stuck_state(stack: Stack, docs: list[Doc]) -> dict:
    """Where the jobs that never ended stand, for the report: each job's status and its pages'
    (status, attempts, seconds since last touched), and what waits in Redis. Empty when none."""
    if not docs:
        return {}
    out: dict = {"jobs": {}}
    with psycopg.connect(stack.database_url) as conn:
        for doc in docs:
            job = conn.execute(
                "SELECT status, page_count, extract(epoch FROM now() - updated_at)::int FROM jobs_job WHERE id = %s",
                (doc.job_id,),
            ).fetchone()
            pages = conn.execute(
                "SELECT index, status, attempts, extract(epoch FROM now() - updated_at)::int FROM jobs_page"
                " WHERE job_id = %s ORDER BY index",
                (doc.job_id,),
            ).fetchall()
            out["jobs"][str(doc.index)] = {"kind": doc.kind, "job": job, "pages": pages}
    try:
        client = redis.Redis(port=stack.redis_port)
        out["redis"] = {q: client.llen(q) for q in ("cpu", "layout", "ocr", "webhooks")} | {
            "unacked": client.hlen("unacked")
        }
    except redis.RedisError as exc:  # a report, not a check: say what went wrong and go on
        out["redis"] = repr(exc)
    return out


def check(report: dict, size: Size) -> list[str]:
    """What fails the run: a job lost or wrong, a row duplicated, a page recognised twice, a fault
    that never happened, any 5xx but a 503."""
    failures = []
    if report["lost_or_wrong"]:
        failures.append(f"{report['lost_or_wrong']} jobs lost or wrong: {list(report['problems'].items())[:10]}")
        if report["stuck"]:
            failures.append(f"where the unfinished jobs stand: {json.dumps(report['stuck'])[:3000]}")
    if report["jobs_in_database"] != size.jobs:
        failures.append(f"{report['jobs_in_database']} jobs in the database for {size.jobs} documents")
    if report["duplicate_page_rows"]:
        failures.append(f"{report['duplicate_page_rows']} duplicated page rows")
    if report["kill_count"] < size.kills:
        failures.append(f"only {report['kill_count']} of {size.kills} kills happened before the load ended")
    if size.hosts and report["partition"]["at_s"] is None:
        failures.append("the partition never happened")
    if report["pages_recognised_twice"]:
        failures.append(f"{report['pages_recognised_twice']} pages were recognised twice")
    if report["redis_outage"]["at_s"] is None:
        failures.append("the Redis outage never happened")
    if report["postgres_outage"]["at_s"] is None:
        failures.append("the PostgreSQL outage never happened")
    elif not any(k.endswith("503 busy:database") for k in report["http_during"].get("postgres_down", {})):
        failures.append(f"no client got 503 busy:database while PostgreSQL was down: {report['http_during']}")
    if report["http_5xx_not_503"]:
        failures.append(f"{report['http_5xx_not_503']} answers were a 5xx other than 503: {report['http']}")
    return failures
