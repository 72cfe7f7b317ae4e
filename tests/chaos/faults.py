"""The faults: SIGKILLs of pool processes and workers (and the supervisor that starts them
again), the Redis outage, the PostgreSQL crash, and one worker host's partition."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from tests.chaos import hosts as worker_hosts
from tests.chaos.documents import Doc, accepted
from tests.chaos.load import Figures
from tests.chaos.plan import ARTIFACTS, POSTGRES_AT, REDIS_AT, ROOT, SETTLE_S, Size
from tests.chaos.stack import Stack


def killer(stack: Stack, size: Size, stop: threading.Event, log: list[dict], rng: random.Random) -> None:
    """SIGKILL a pool process or a whole worker at random moments (``supervisor`` starts a
    killed worker again)."""
    t0 = time.monotonic()
    while len(log) < size.kills and not stop.is_set():
        if stop.wait(rng.uniform(0.3, 1.7) * size.kill_every_s):
            return
        queue_name, _concurrency = rng.choice(Stack.WORKERS)
        proc = stack.procs[queue_name]
        try:
            children = psutil.Process(proc.pid).children()
        except psutil.NoSuchProcess:
            children = []
        if children and rng.random() < 0.6:
            victim = rng.choice(children)
            try:
                victim.kill()
            except psutil.NoSuchProcess:
                continue
            log.append({"t": round(time.monotonic() - t0, 1), "what": f"{queue_name} pool process"})
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            log.append({"t": round(time.monotonic() - t0, 1), "what": f"{queue_name} worker"})


def supervisor(stack: Stack, stop: threading.Event, log: list[dict]) -> None:
    """Start again every worker whose process ended, a second after, as Kubernetes or compose's
    restart policy does: a worker killed whole, and one that exited by itself. Celery exits
    ("Could not start worker processes") when a pool process dies before its pool has started,
    which a pool-process kill right after a restart does (seen in a CI rehearsal: without a
    supervisor the cpu queue, the sweep's, was left with no worker at all)."""
    t0 = time.monotonic()
    while not stop.wait(0.5):
        for queue_name, concurrency in Stack.WORKERS:
            code = stack.procs[queue_name].poll()
            if code is None or stop.wait(1.0):
                continue
            log.append({"t": round(time.monotonic() - t0, 1), "worker": queue_name, "exit": code})
            stack.start_worker(queue_name, concurrency)
        for host in stack.hosts:
            for queue_name, concurrency in Stack.HOST_WORKERS:
                code = stack.procs[f"{host.name}-{queue_name}"].poll()
                if code is None or stop.wait(1.0):
                    continue
                log.append({"t": round(time.monotonic() - t0, 1), "worker": f"{host.name}-{queue_name}", "exit": code})
                stack.start_host_worker(host, queue_name, concurrency)


def redis_outage(stack: Stack, size: Size, docs: list[Doc], figures: Figures, stop: threading.Event, out: dict) -> None:
    """Kill Redis once REDIS_AT of the jobs are accepted; restart it empty after outage_s."""
    while not stop.is_set() and accepted(docs) < REDIS_AT * len(docs):
        time.sleep(0.2)
    if stop.is_set():
        return
    out["accepted_before"] = accepted(docs)
    out["killed_at"] = time.monotonic()
    figures.window = "redis_down"
    stack.kill_redis()
    time.sleep(size.outage_s)
    stack.start_redis()
    figures.window = None
    out["restarted_at"] = time.monotonic()
    out["accepted_during"] = accepted(docs) - out["accepted_before"]


def postgres_outage(
    stack: Stack,
    size: Size,
    docs: list[Doc],
    figures: Figures,
    stop: threading.Event,
    redis: dict,
    out: dict,
) -> None:
    """Crash PostgreSQL (every process SIGKILLed) once POSTGRES_AT of the jobs are accepted and
    Redis is back; start it again on the same port and data directory after pg_outage_s. Web,
    workers and beat are left alone: they must find the server again by themselves."""
    while not stop.is_set() and ("restarted_at" not in redis or accepted(docs) < POSTGRES_AT * len(docs)):
        time.sleep(0.2)
    if stop.is_set():
        return
    out["accepted_before"] = accepted(docs)
    figures.window = "postgres_down"
    out["killed_at"] = time.monotonic()
    stack.postgres.crash()
    out["dead_at"] = time.monotonic()
    time.sleep(size.pg_outage_s)
    out["restart_at"] = time.monotonic()
    stack.postgres.start()  # returns once crash recovery is over and it accepts queries
    out["up_at"] = time.monotonic()
    figures.window = None
    out["accepted_during"] = accepted(docs) - out["accepted_before"]


def active_tasks(stack: Stack, host: worker_hosts.WorkerHost) -> list[dict]:
    """The page claims ``host``'s workers are working on now, as they report it (through Redis)."""
    names = ",".join(f"{q}@{host.name}" for q, _c in Stack.HOST_WORKERS)
    out = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "ocrsite", "inspect", "active", "-d", names, "-j", "-t", "3"],
        cwd=ROOT,
        env=stack.env,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        replies = json.loads(out.stdout[out.stdout.index("{") :]) if "{" in out.stdout else {}
    except ValueError:
        return []
    claiming = ("workers.detect_layout", "workers.recognize")  # the stages that hold page claims
    return [task for tasks in replies.values() for task in tasks if task.get("name") in claiming]


def claims_lost(path: Path, offset: int = 0) -> int:
    """The "claim lost" lines (late writes refused by a claim) in a worker's log, from ``offset``."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            return sum(1 for line in fh if b"claim lost:" in line)
    except OSError:
        return 0


def _task_ended(logs, task_id: str) -> bool:
    ended = (b"succeeded", b"raised", b"retry:", b"failed")
    for path in logs:
        with contextlib.suppress(OSError), path.open("rb") as fh:
            if any(task_id.encode() in line and any(e in line for e in ended) for line in fh):
                return True
    return False


def partition(stack: Stack, size: Size, docs: list[Doc], stop: threading.Event, pg: dict, out: dict) -> None:
    """Cut host1 off from Redis and PostgreSQL for partition_s once PostgreSQL is back from its
    outage (one fault at a time) and host1's workers hold claims (pages they are laying out or
    recognising); then heal, and wait for its held tasks to end (``settled_at``). The run waits
    for this thread before it ends: the late writes come after the heal."""
    host = stack.hosts[0]
    while not stop.is_set() and "up_at" not in pg:
        time.sleep(0.2)
    holding: list[dict] = []
    while not stop.is_set() and not holding:
        holding = active_tasks(stack, host)
        if not holding:
            time.sleep(0.5)
    if stop.is_set():
        return
    logs = {q: ARTIFACTS / f"{host.name}-{q}.log" for q, _c in Stack.HOST_WORKERS}
    out["held_tasks"] = [{"name": t.get("name"), "args": t.get("args"), "id": t.get("id")} for t in holding]
    out["cut_at"] = time.monotonic()
    host.cut()
    time.sleep(size.partition_s)
    out["offsets"] = {q: (p.stat().st_size if p.exists() else 0) for q, p in logs.items()}
    host.heal()
    out["healed_at"] = time.monotonic()
    out["logs"] = logs
    # The cut-off workers try their late writes once TCP retransmits (seconds after the heal):
    # the next fault waits until each held task has ended (its own log says so; its broker
    # connection may still be down, so it cannot be asked), so what refuses those late writes is
    # the claims, not an outage.
    held = [t["id"] for t in holding if t.get("id")]
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline and not all(_task_ended(logs.values(), task_id) for task_id in held):
        time.sleep(1)
    out["settled_at"] = time.monotonic()
