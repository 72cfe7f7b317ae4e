"""Fault tests of the real stack: ``python -m tests.chaos [--size ci|full|big]`` (``make test-chaos``).

Starts its own stack beside anything else on the machine: a Redis on a free port (no
persistence, so a kill loses every message), a PostgreSQL cluster of its own (initdb into a temp
dir, a free port, run as the ``postgres`` user when we are root; the server binaries come from
/usr/lib/postgresql/<version>/bin or CHAOS_PG_BIN), gunicorn on a free port, one Celery worker
per queue (cpu, layout, ocr) and beat with a 5 s sweep. Web and workers keep persistent
database connections with health checks, as deployed. Then, while clients submit a mix of
born-digital PDFs (1-3 pages, each page carrying its document's own token) and scans (1-2 pages
of the phototest scan) and poll them:

- Load: every job must end ``done``; each result holds its own document's text and no
  other's, each page once, no region twice.
- Worker deaths: pool processes and whole workers SIGKILLed at random moments (a worker that
  ends, killed or by itself, is started again a second later, as a supervisor would).
- Broker loss: Redis SIGKILLed mid-run and restarted empty. The API answers 503
  ``busy:unavailable`` while it is down (clients retry with the same Idempotency-Key); whatever it
  accepted (202) must complete, through the sweep for messages Redis lost.
- PostgreSQL crash: once 65 % of the jobs are accepted and Redis is back, every process of the
  server is SIGKILLed (no shutdown checkpoint, connections cut), kept down for pg_outage_s and
  started again on the same port and data directory (crash recovery). Web, workers and beat are
  not restarted: the API answers 503 ``busy:database`` meanwhile (clients retry), tasks that hit
  the outage retry and then the sweep re-sends them, and every accepted job must complete.

- Partition: beside the machine's own workers, worker *hosts* (tests/chaos/hosts.py), each a
  network namespace with its own address and one worker per queue, reaching Redis and
  PostgreSQL through a veth link. Once PostgreSQL is back from its crash and a host's workers
  hold claims (``celery inspect active``), every packet between that host and Redis/PostgreSQL is
  dropped for partition_s, longer than OCR_STALE_AFTER, so the sweep hands its pages to the other
  hosts; then the link heals. Its late writes must be refused by the claims: counted from its
  workers' "claim lost" lines; no page may be recognised twice (stage events), none lost.

Every answer's status is counted (a 503 with its code), over the run and per outage; any 5xx but
a 503 fails the run. Exit status 0 only when nothing was lost; the figures are printed and
written as JSON to tests/artifacts/chaos/report.json. The VLM outage is tests/test_vlm_outage.py.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import signal
import sys
import threading
import time
from dataclasses import asdict, replace

from tests.chaos import hosts as worker_hosts
from tests.chaos.documents import Doc, make_doc
from tests.chaos.faults import claims_lost, killer, partition, postgres_outage, redis_outage, supervisor
from tests.chaos.load import Figures, poll, submit, watcher
from tests.chaos.plan import ARTIFACTS, SETTLE_S, SIZES, STALE_AFTER_S, WATCHERS, Size
from tests.chaos.report import check, count_rows, cpu_model, load_sampler, pages_recognised_twice, progress, stuck_state
from tests.chaos.stack import Stack, postgres_bin


def run(size: Size, seed: int) -> dict:
    rng = random.Random(seed)
    docs = [make_doc(i, rng, size.scan_share) for i in range(size.jobs)]
    stack = Stack(hosts=size.hosts)
    figures = Figures()
    cut: dict = {}
    outage: dict = {}
    kills: list[dict] = []
    restarts: list[dict] = []
    pg_outage: dict = {}
    loads: list[float] = []
    stop = threading.Event()
    # Joined before the stack stops, whatever happens: it must not start a worker during teardown.
    supervising = threading.Thread(target=supervisor, args=(stack, stop, restarts), daemon=True)
    started = time.monotonic()
    started_utc = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        stack.start()
        key = stack.manage("create_api_key", "chaos")
        base = f"http://127.0.0.1:{stack.web_port}"
        ready = time.monotonic()
        partitioner = (
            threading.Thread(target=partition, args=(stack, size, docs, stop, pg_outage, cut), daemon=True)
            if stack.hosts
            else None
        )
        fault_threads = [
            threading.Thread(target=killer, args=(stack, size, stop, kills, rng), daemon=True),
            supervising,
            threading.Thread(target=redis_outage, args=(stack, size, docs, figures, stop, outage), daemon=True),
            threading.Thread(
                target=postgres_outage,
                args=(stack, size, docs, figures, stop, outage, pg_outage),
                daemon=True,
            ),
            threading.Thread(target=load_sampler, args=(stop, loads), daemon=True),
            threading.Thread(target=progress, args=(stack, docs, stop), daemon=True),
            *([partitioner] if partitioner else []),
            *(
                threading.Thread(target=watcher, args=(base, key, docs, figures, stop, seed + i), daemon=True)
                for i in range(WATCHERS)
            ),
        ]
        for thread in fault_threads:
            thread.start()
        work: queue.Queue[Doc] = queue.Queue()
        for doc in docs:
            work.put(doc)

        def client(mine: list[Doc]) -> None:
            while True:
                try:
                    doc = work.get_nowait()
                except queue.Empty:
                    break
                submit(base, key, doc, figures, stop)
                mine.append(doc)
            poll(base, key, mine, figures, ready + size.drain_timeout_s, size.poll_every_s)

        per_client: list[list[Doc]] = [[] for _ in range(size.clients)]
        clients = [threading.Thread(target=client, args=(mine,)) for mine in per_client]
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join()
        drained = time.monotonic()
        if partitioner:
            # The cut-off host's late writes come after the heal: wait for them (the held page
            # was taken over, so the clients may finish first).
            partitioner.join(timeout=size.partition_s + SETTLE_S + 60)
        stop.set()
        for thread in fault_threads:
            thread.join(timeout=60)
        pages_db, jobs_db, dup_pages = count_rows(stack.database_url)
        twice = pages_recognised_twice(stack.database_url)
        all_logs = [ARTIFACTS / f"{name}.log" for name in stack.procs]
        refused_total = sum(claims_lost(p) for p in all_logs)
        refused_late = sum(claims_lost(p, cut.get("offsets", {}).get(q, 0)) for q, p in cut.get("logs", {}).items())
        stuck = stuck_state(stack, [d for d in docs if d.job_id and d.status not in ("done", "failed", "cancelled")])
    finally:
        stop.set()
        if supervising.is_alive():
            supervising.join(timeout=30)
        stack.stop()

    lost = [d for d in docs if d.problems or d.status != "done"]
    return {
        "size": asdict(size),
        "seed": seed,
        "jobs": len(docs),
        "jobs_done": sum(1 for d in docs if d.status == "done"),
        "pages": sum(d.pages for d in docs),
        "scans": sum(1 for d in docs if d.kind == "scan"),
        "jobs_in_database": jobs_db,
        "pages_in_database": pages_db,
        "duplicate_page_rows": dup_pages,
        "clients": size.clients,
        "kills": kills,
        "kill_count": len(kills),
        "restarts": restarts,
        # Workers that exited without a whole-worker kill (SIGKILL's -9), started again.
        "exits_of_their_own": sum(1 for r in restarts if r["exit"] != -signal.SIGKILL),
        "partition": {
            "hosts": size.hosts,
            "seconds": size.partition_s,
            "stale_after_s": STALE_AFTER_S,
            "at_s": round(cut["cut_at"] - ready, 1) if "cut_at" in cut else None,
            "held_tasks_at_cut": cut.get("held_tasks"),
            # Writes of the cut-off host refused by a claim after it healed: its late writes.
            "late_writes_refused": refused_late if "healed_at" in cut else None,
            "settled_s": round(cut["settled_at"] - cut["healed_at"], 1) if "settled_at" in cut else None,
        },
        "claims_lost_all_workers": refused_total,
        "pages_recognised_twice": twice,
        "redis_outage": {
            "seconds": size.outage_s,
            "accepted_before": outage.get("accepted_before"),
            "accepted_during_outage": outage.get("accepted_during"),
            "at_s": round(outage["killed_at"] - ready, 1) if "killed_at" in outage else None,
        },
        "postgres_outage": {
            "seconds": size.pg_outage_s,
            "accepted_before": pg_outage.get("accepted_before"),
            "accepted_during_outage": pg_outage.get("accepted_during"),
            "at_s": round(pg_outage["killed_at"] - ready, 1) if "killed_at" in pg_outage else None,
            "kill_s": round(pg_outage["dead_at"] - pg_outage["killed_at"], 1) if "dead_at" in pg_outage else None,
            # From the start command to the first query answered: crash recovery included.
            "restart_s": round(pg_outage["up_at"] - pg_outage["restart_at"], 1) if "up_at" in pg_outage else None,
            "down_s": round(pg_outage["up_at"] - pg_outage["killed_at"], 1) if "up_at" in pg_outage else None,
            # The last 503 busy:database any client got, after the server answered again: how long
            # web took to find it (negative: none after it was back).
            "last_refusal_after_up_s": (
                round(figures.last_seen["503 busy:database"] - pg_outage["up_at"], 1)
                if "up_at" in pg_outage and "503 busy:database" in figures.last_seen
                else None
            ),
        },
        "http": dict(sorted(figures.statuses.items())),
        "http_during": {k: dict(sorted(v.items())) for k, v in figures.windows.items()},
        "http_5xx_not_503": sum(n for k, n in figures.statuses.items() if k[0] == "5" and not k.startswith("503")),
        "startup_s": round(ready - started, 1),
        "run_s": round(drained - ready, 1),
        "problems": {str(d.index): d.problems or [f"status {d.status!r}"] for d in lost},
        "stuck": stuck,
        "lost_or_wrong": len(lost),
        "load_avg": os.getloadavg(),
        "load_avg_1min_max": max(loads, default=None),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model(),
        "started_utc": started_utc,
        "ended_utc": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="ci")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument(
        "--drain-timeout", type=float, help="seconds the clients wait for every job (default: the size's)"
    )
    parser.add_argument("--hosts", type=int, help="worker hosts in network namespaces (default: the size's)")
    parser.add_argument("--jobs", type=int, help="documents to submit (default: the size's); a shorter rehearsal")
    parser.add_argument("--kills", type=int, help="SIGKILLs to deal (default: the size's)")
    args = parser.parse_args()
    size = SIZES[args.size]
    if args.jobs:
        size = replace(size, jobs=args.jobs)
    if args.kills is not None:
        size = replace(size, kills=args.kills)
    if args.hosts is not None:
        size = replace(size, hosts=args.hosts)
    if args.drain_timeout:
        size = replace(size, drain_timeout_s=args.drain_timeout)
    postgres_bin()  # no server binaries: say so before anything starts
    if size.hosts and (why := worker_hosts.available()):
        raise SystemExit(f"chaos: {why}; run with --hosts 0 to skip the partition")
    report = run(size, args.seed)
    (ARTIFACTS / "report.json").write_text(json.dumps(report, indent=2))
    summary = {k: v for k, v in report.items() if k not in ("kills", "restarts", "problems", "stuck")}
    print(json.dumps(summary, indent=2))
    failures = check(report, size)
    for failure in failures:
        print("chaos: FAILED:", failure, file=sys.stderr)
    print("chaos: ok" if not failures else "chaos: see tests/artifacts/chaos/*.log", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
