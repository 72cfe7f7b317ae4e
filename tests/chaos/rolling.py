"""A rolling upgrade under load: ``python -m tests.chaos.rolling [--jobs N]`` (``make test-chaos``
runs it after the fault run).

The chaos stack (its own Redis, PostgreSQL, gunicorn, one worker per queue, beat: tests/chaos)
takes a stream of born-digital PDFs and scans from several clients while every tier is replaced
one by one the way a Deployment rolls (maxSurge 1, maxUnavailable 0): the new process starts and
becomes ready, then the old one gets SIGTERM (to its first process only, as the kubelet sends it)
and is waited for. web's old and new gunicorn share the port (SO_REUSEPORT), as two pods share a
Service; beat, a single scheduler (strategy Recreate), stops before its successor starts. Between
the cpu and the layout tier a schema migration is applied under the load, the expand step of an
expand/contract change (a nullable column and an index built concurrently, with a lock timeout),
and the later tiers start once ``manage.py migrate --check`` passes, as their init containers wait
in the cluster. Each worker tier is signalled only once it holds or awaits work (the KEDA queries),
so every SIGTERM lands mid-work.

Passes only when every accepted job ends ``done`` with its own text (0 lost), no page row and no
recognition is duplicated, and no answer was a 5xx other than a 503 carrying Retry-After. It
reports how long each old process took to go after SIGTERM and what the clients saw.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg

from tests.chaos import load
from tests.chaos.documents import make_doc
from tests.chaos.plan import ARTIFACTS, ROOT
from tests.chaos.report import count_rows, cpu_model, pages_recognised_twice
from tests.chaos.stack import Stack, postgres_bin

ORDER = ("web", "cpu", "layout", "ocr", "beat")
MIGRATE_BEFORE = "layout"  # the schema changes once web and cpu run the new version
EXPAND = (
    "SET lock_timeout = '5s'",
    "ALTER TABLE jobs_page ADD COLUMN IF NOT EXISTS rolling_probe integer NULL",
)
EXPAND_INDEX = "CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_page_rolling_probe ON jobs_page (rolling_probe)"
# The work each worker tier holds or is about to take (the KEDA queries of k8s/base/keda.yaml): a
# tier is rolled once it has some, so its SIGTERM lands mid-work.
WORK = {
    "cpu": "SELECT count(*) FROM jobs_job j WHERE j.status IN ('queued', 'assembling')"
    " OR (j.status = 'running' AND j.page_count > (SELECT count(*) FROM jobs_page p WHERE p.job_id = j.id))",
    "layout": "SELECT count(*) FROM jobs_page p JOIN jobs_job j ON j.id = p.job_id"
    " WHERE j.status = 'running' AND p.status IN ('queued', 'detecting')",
    "ocr": "SELECT count(*) FROM jobs_page p JOIN jobs_job j ON j.id = p.job_id"
    " WHERE j.status = 'running' AND p.status IN ('detected', 'recognizing')",
}


class RollingStack(Stack):
    """The chaos stack with web on SO_REUSEPORT, so an old and a new gunicorn can share the port."""

    def spawn(self, name: str, cmd: list[str]) -> None:
        if name.startswith("web"):
            cmd = [*cmd, "--reuse-port"]
        super().spawn(name, cmd)


class Clients503:
    """Every 503 must say when to come back (Retry-After); counted beside load.Figures."""

    def __init__(self) -> None:
        self.without_retry_after = 0
        self.lock = threading.Lock()

    def wrap(self, original):
        def request(session, figures, method, url, **kw):
            resp = original(session, figures, method, url, **kw)
            if resp is not None and resp.status_code == 503 and not resp.headers.get("Retry-After"):
                with self.lock:
                    self.without_retry_after += 1
            return resp

        return request


def ready(log: Path, since: int, marker: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker in log.read_text(errors="replace")[since:]:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{log.name}: no {marker!r} within {timeout}s")


def migrate_check(stack: Stack, timeout: float = 60) -> float:
    """What wait-for-migrations does before a pod starts: seconds until ``migrate --check`` passes."""
    started = time.monotonic()
    while subprocess.run(
        [sys.executable, "manage.py", "migrate", "--check"], cwd=ROOT, env=stack.env, capture_output=True
    ).returncode:
        if time.monotonic() - started > timeout:
            raise RuntimeError("migrate --check never passed")
        time.sleep(1)
    return time.monotonic() - started


def expand_schema(stack: Stack) -> float:
    started = time.monotonic()
    with psycopg.connect(stack.database_url, autocommit=True) as conn:
        with conn.transaction():
            for statement in EXPAND:
                conn.execute(statement)
        conn.execute(EXPAND_INDEX)  # CONCURRENTLY: outside a transaction, no write lock held
    return time.monotonic() - started


def work_of(stack: Stack, tier: str) -> int:
    if tier not in WORK:
        return 0
    with psycopg.connect(stack.database_url) as conn:
        return conn.execute(WORK[tier]).fetchone()[0]


def replace_tier(stack: Stack, name: str, generation: int) -> dict:
    """Start the new version of one tier, then SIGTERM the old one and wait for it to go (once the
    tier has work, so the signal lands mid-work)."""
    old = stack.procs.pop(name)
    new_name = f"{name}-v{generation}"
    log = ARTIFACTS / f"{new_name}.log"
    since = log.stat().st_size if log.exists() else 0
    step: dict = {"tier": name}
    if name == "beat":  # Recreate: one scheduler at a time
        t0 = time.monotonic()
        old.send_signal(signal.SIGTERM)
        step["exit_code"] = old.wait(timeout=60)
        step["gone_after_sigterm_s"] = round(time.monotonic() - t0, 2)
    if name == "web":
        bin_dir = Path(sys.executable).parent
        stack.spawn(
            new_name,
            [str(bin_dir / "gunicorn"), "ocrsite.wsgi:application", "--bind", f"127.0.0.1:{stack.web_port}"]
            + ["--workers", "2", "--worker-class", "gthread", "--threads", "8", "--timeout", "120"],
        )
        ready(log, since, "Booting worker")
        time.sleep(2)  # both gthread workers import Django before they accept
    elif name == "beat":
        schedule = str(stack.tmp / f"beat-schedule-{generation}")
        stack.spawn(new_name, [sys.executable, "-m", "celery", "-A", "ocrsite", "beat", "-s", schedule, "-l", "INFO"])
    else:
        concurrency = dict(stack.WORKERS)[name]
        cmd = [sys.executable, "-m", "celery", "-A", "ocrsite", "worker", "-Q", name]
        cmd += ["-n", f"{name}-v{generation}@chaos", "--concurrency", str(concurrency), "--loglevel", "INFO"]
        stack.spawn(new_name, cmd)
        ready(log, since, "ready.")
    if name != "beat":
        deadline = time.monotonic() + 60
        while (work := work_of(stack, name)) == 0 and name in WORK and time.monotonic() < deadline:
            time.sleep(0.1)
        step["work_at_sigterm"] = work if name in WORK else None
        t0 = time.monotonic()
        old.send_signal(signal.SIGTERM)  # the first process only, as the kubelet sends it
        try:
            step["exit_code"] = old.wait(timeout=150)
        except subprocess.TimeoutExpired:
            old.kill()
            step["exit_code"] = "SIGKILL after 150 s"
        step["gone_after_sigterm_s"] = round(time.monotonic() - t0, 2)
    return step


def progress(stack: Stack, docs: list) -> dict:
    """Where the load stood when a tier began to roll: jobs accepted, and jobs done by then."""
    with psycopg.connect(stack.database_url) as conn:
        done = conn.execute("SELECT count(*) FROM jobs_job WHERE status = 'done'").fetchone()[0]
    return {"accepted_at_start": sum(1 for d in docs if d.job_id), "done_at_start": done}


def roll(stack: Stack, docs: list, start_after: int, out: dict, stop: threading.Event) -> None:
    while sum(1 for d in docs if d.job_id) < start_after and not stop.wait(0.2):
        pass
    out["started_with_accepted"] = sum(1 for d in docs if d.job_id)
    out["steps"] = []
    for name in ORDER:
        if name == MIGRATE_BEFORE:
            out["migration_s"] = round(expand_schema(stack), 2)
            out["migrate_check_s"] = round(migrate_check(stack), 2)
        out["steps"].append({**progress(stack, docs), **replace_tier(stack, name, 2)})
        if stop.is_set():
            return
    out["finished_with_accepted"] = sum(1 for d in docs if d.job_id)


def run(jobs: int, clients: int, seed: int, drain_timeout_s: float, spread_s: float) -> dict:
    rng = random.Random(seed)
    docs = [make_doc(i, rng, 0.4) for i in range(jobs)]  # scans: work for layout and ocr
    stack = RollingStack(hosts=0)
    figures = load.Figures()
    checker = Clients503()
    load.request = checker.wrap(load.request)
    rolled: dict = {}
    stop = threading.Event()
    started_utc = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        stack.start()
        key = stack.manage("create_api_key", "rolling")
        base = f"http://127.0.0.1:{stack.web_port}"
        began = time.monotonic()
        roller = threading.Thread(target=roll, args=(stack, docs, jobs // 5, rolled, stop), daemon=True)
        roller.start()
        gap_s = spread_s * clients / max(1, jobs)
        work: queue.Queue = queue.Queue()
        for doc in docs:
            work.put(doc)

        def client(mine: list) -> None:
            # Submissions spread over the roll (spread_s): a steady stream, not one burst before it.
            while True:
                try:
                    doc = work.get_nowait()
                except queue.Empty:
                    break
                load.submit(base, key, doc, figures, stop)
                mine.append(doc)
                time.sleep(random.uniform(0, 2 * gap_s))
            load.poll(base, key, mine, figures, began + drain_timeout_s, 1.0)

        per_client: list[list] = [[] for _ in range(clients)]
        threads = [threading.Thread(target=client, args=(mine,)) for mine in per_client]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        roller.join(timeout=300)
        drained = time.monotonic()
        pages_db, jobs_db, dup_pages = count_rows(stack.database_url)
        twice = pages_recognised_twice(stack.database_url)
        handed_back = 0
        with psycopg.connect(stack.database_url) as conn:
            handed_back = conn.execute("SELECT count(*) FROM jobs_stageevent WHERE outcome = 'handed-back'").fetchone()[
                0
            ]
    finally:
        stop.set()
        stack.stop()
    lost = [d for d in docs if d.problems or d.status != "done"]
    return {
        "jobs": jobs,
        "jobs_done": sum(1 for d in docs if d.status == "done"),
        "pages": sum(d.pages for d in docs),
        "scans": sum(1 for d in docs if d.kind == "scan"),
        "jobs_in_database": jobs_db,
        "pages_in_database": pages_db,
        "duplicate_page_rows": dup_pages,
        "pages_recognised_twice": twice,
        "pages_handed_back": handed_back,
        "roll": rolled,
        "http": dict(sorted(figures.statuses.items())),
        "http_5xx_not_503": sum(n for k, n in figures.statuses.items() if k[0] == "5" and not k.startswith("503")),
        "http_503_without_retry_after": checker.without_retry_after,
        "lost_or_wrong": len(lost),
        "problems": {str(d.index): d.problems or [f"status {d.status!r}"] for d in lost},
        "run_s": round(drained - began, 1),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "started_utc": started_utc,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--drain-timeout", type=float, default=600)
    parser.add_argument("--spread", type=float, default=90, help="seconds over which the clients submit")
    args = parser.parse_args()
    postgres_bin()
    report = run(args.jobs, args.clients, args.seed, args.drain_timeout, args.spread)
    (ARTIFACTS / "rolling.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "problems"}, indent=2))
    failures = []
    if report["lost_or_wrong"]:
        failures.append(f"{report['lost_or_wrong']} jobs lost or wrong: {list(report['problems'].items())[:10]}")
    if report["jobs_in_database"] != args.jobs:
        failures.append(f"{report['jobs_in_database']} jobs in the database for {args.jobs} documents")
    if report["duplicate_page_rows"] or report["pages_recognised_twice"]:
        failures.append("duplicated pages or recognitions")
    if len(report["roll"].get("steps", [])) != len(ORDER):
        failures.append(f"the roll did not finish: {report['roll']}")
    idle = [s["tier"] for s in report["roll"].get("steps", []) if s.get("work_at_sigterm") == 0]
    if idle:
        failures.append(f"tiers rolled with no work in hand (not under load): {idle}")
    if report["http_5xx_not_503"] or report["http_503_without_retry_after"]:
        failures.append(f"5xx beyond 503 with Retry-After: {report['http']}")
    for failure in failures:
        print("rolling: FAILED:", failure, file=sys.stderr)
    print("rolling: ok" if not failures else "rolling: see tests/artifacts/chaos/*.log", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
