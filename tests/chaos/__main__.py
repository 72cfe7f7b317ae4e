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
import contextlib
import io
import json
import os
import pwd
import queue
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import psutil
import psycopg
import pymupdf
import redis
import requests
from PIL import Image

from tests.chaos import hosts as worker_hosts

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts" / "chaos"
PHOTOTEST = ROOT / "tests" / "data" / "phototest.tif"
TOKEN = re.compile(r"tok\d{5}x[0-9a-f]{6}")


@dataclass(frozen=True)
class Size:
    jobs: int
    clients: int
    kills: int
    scan_share: float  # share of jobs that are scans (OCR); the rest are born-digital
    kill_every_s: float  # mean pause between kills
    outage_s: float  # how long Redis stays down
    pg_outage_s: float  # how long PostgreSQL stays down
    drain_timeout_s: float
    hosts: int = 1  # worker hosts in network namespaces of their own, beside the machine's workers
    partition_s: float = 45  # how long one host is cut off from Redis and PostgreSQL
    # Each client's pause between two polls: its share of the API's load once it has submitted.
    # 1 s for 50 clients is 50 requests/s; 100 clients at 3 s keep the polls under 40/s on 2 cores.
    poll_every_s: float = 1.0


SIZES = {
    "ci": Size(
        jobs=100,
        clients=10,
        kills=6,
        scan_share=0.15,
        kill_every_s=4,
        outage_s=8,
        pg_outage_s=8,
        drain_timeout_s=600,
        hosts=1,
        partition_s=40,
    ),
    "full": Size(
        jobs=1000,
        clients=50,
        kills=20,
        scan_share=0.05,
        kill_every_s=10,
        outage_s=10,
        pg_outage_s=20,
        drain_timeout_s=2400,
        hosts=2,
        partition_s=50,
    ),
    # The run by hand (issue 24): hours on a 2-core box, never in CI. Born-digital mostly: a scan
    # page costs seconds of OCR, so 1 % scans is already about a sixth of the CPU.
    "big": Size(
        jobs=10_000,
        clients=100,
        kills=40,
        scan_share=0.01,
        kill_every_s=30,
        outage_s=15,
        pg_outage_s=30,
        drain_timeout_s=3 * 3600,
        hosts=3,
        partition_s=50,
        poll_every_s=3.0,
    ),
}
# When the faults strike: Redis once this share of the jobs is accepted, PostgreSQL once this share
# is accepted and Redis is back (one outage at a time, so each one's refusals are its own).
REDIS_AT = 0.4
POSTGRES_AT = 0.65
# Above this a claim is handed on by the sweep; the partition outlasts it so that the cut-off
# host's pages are taken over while it still holds them.
STALE_AFTER_S = 25
SETTLE_S = 90  # the longest the next fault waits for the cut-off host's late writes
WATCHERS = 2  # readers polling beside the clients (``watcher``)


# --- documents ---------------------------------------------------------------------------------


@dataclass
class Doc:
    index: int
    kind: str  # "pdf" | "scan"
    pages: int
    token: str
    data: bytes = field(repr=False)
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    job_id: str = ""
    status: str = ""
    submit_tries: int = 0
    problems: list[str] = field(default_factory=list)


def make_doc(index: int, rng: random.Random, scan_share: float) -> Doc:
    token = f"tok{index:05d}x{rng.getrandbits(24):06x}"
    if rng.random() < scan_share:
        pages = rng.choice((1, 2))
        with Image.open(PHOTOTEST) as img:
            frame = img.convert("L")
        out = io.BytesIO()
        frame.save(out, "TIFF", save_all=True, append_images=[frame.copy() for _ in range(pages - 1)], dpi=(300, 300))
        return Doc(index, "scan", pages, token, out.getvalue())
    pages = rng.choice((1, 1, 2, 3))
    doc = pymupdf.open()
    for page_no in range(1, pages + 1):
        page = doc.new_page()
        page.insert_text((72, 72), f"Chaos document {token} page {page_no} of {pages}.", fontsize=11)
        page.insert_text((72, 100), "A born-digital page: its text layer is long enough to skip OCR.", fontsize=11)
    return Doc(index, "pdf", pages, token, doc.tobytes())


def check_result(doc: Doc, markdown: str, layout: dict) -> list[str]:
    """What is wrong with a finished job's result (empty: nothing)."""
    problems = []
    pages = layout.get("pages", [])
    if len(pages) != doc.pages:
        problems.append(f"{len(pages)} pages in the JSON, {doc.pages} in the document")
    for page in pages:
        seen = set()
        for region in page.get("regions", []):
            ident = (tuple(region.get("bbox") or ()), region.get("text", ""))
            if ident in seen and ident[1].strip():
                problems.append(f"region duplicated on page {page.get('index')}: {ident[1][:40]!r}")
            seen.add(ident)
    foreign = set(TOKEN.findall(markdown)) - {doc.token}
    if foreign:
        problems.append(f"another document's text: {sorted(foreign)[:3]}")
    if doc.kind == "pdf":
        for page_no in range(1, doc.pages + 1):
            n = markdown.count(f"{doc.token} page {page_no} of {doc.pages}")
            if n != 1:
                problems.append(f"page {page_no} appears {n} times")
    else:
        for i, page in enumerate(pages):
            text = " ".join(r.get("text", "") for r in page.get("regions", [])).lower()
            n = text.count("lazy")
            if not 1 <= n <= 4:  # the scan says "lazy fox" four times: more is a duplicate
                problems.append(f"scan page {i + 1}: 'lazy' {n} times")
    return problems


# --- the stack ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on {port} after {timeout}s")


def postgres_bin() -> Path:
    """The newest PostgreSQL server's bin directory (Debian's /usr/lib/postgresql/<version>/bin,
    or CHAOS_PG_BIN); a clear exit when there is none."""
    if os.environ.get("CHAOS_PG_BIN"):
        candidates = [Path(os.environ["CHAOS_PG_BIN"])]
    else:
        versions = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if p.parent.name.isdigit()]
        candidates = sorted(versions, key=lambda p: int(p.parent.name), reverse=True)
        if shutil.which("initdb"):
            candidates.append(Path(shutil.which("initdb")).parent)
    for bin_dir in candidates:
        if (bin_dir / "initdb").exists() and (bin_dir / "postgres").exists():
            return bin_dir
    raise SystemExit(
        "chaos: no PostgreSQL server binaries (initdb, postgres) under /usr/lib/postgresql/<version>/bin "
        "or on PATH; the harness runs its own server to crash it. Install them (apt-get install "
        "postgresql) or set CHAOS_PG_BIN to the directory holding them."
    )


def _alive(proc: psutil.Process) -> bool:
    """Still running: a zombie is dead already (its sockets closed) and waits only for whoever
    reaps orphans, which may take seconds."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


class Postgres:
    """A PostgreSQL cluster of this run's own (initdb into a temp dir, a free port on 127.0.0.1,
    trust auth), so it can be crashed and restarted without touching any other server.

    initdb and postgres refuse to run as root: as root they run as the ``postgres`` user."""

    def __init__(self, listen: tuple[str, ...] = ("127.0.0.1",)) -> None:
        self.bin = postgres_bin()
        self.listen = listen
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                raise SystemExit("chaos: running as root needs a `postgres` user to run the server as") from None
            # Under /tmp, not $TMPDIR: root's temp dir may be closed to the postgres user.
            self.dir = Path(tempfile.mkdtemp(prefix="ocr-chaos-pg-", dir="/tmp"))
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        else:
            self.dir = Path(tempfile.mkdtemp(prefix="ocr-chaos-pg-"))
        self.data = self.dir / "data"

    def url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def init(self) -> None:
        cmd = [str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust"]
        cmd += ["-E", "UTF8", "--locale=C", "--no-sync"]
        out = subprocess.run(self.as_user + cmd, cwd=self.dir, capture_output=True, text=True, check=False)
        if out.returncode:
            raise RuntimeError(f"initdb failed: {out.stdout[-1000:]}{out.stderr[-2000:]}")
        # The worker hosts connect from their own addresses, through their gateways.
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write("host all all 10.0.0.0/8 trust\n")

    def start(self, timeout: float = 120) -> None:
        """Start the server on its port and data directory; return once it accepts queries (after
        crash recovery, on a restart)."""
        log = (ARTIFACTS / "postgres.log").open("a")
        cmd = [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port)]
        cmd += ["-c", f"listen_addresses={','.join(self.listen)}", "-c", f"unix_socket_directories={self.dir}"]
        # fsync only matters if the machine itself goes down; a killed server loses nothing the
        # kernel already holds, so crash recovery is the same without the cost on a shared box.
        cmd += ["-c", "fsync=off", "-c", "max_connections=200"]
        self.proc = subprocess.Popen(
            self.as_user + cmd, cwd=self.dir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.url("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("PostgreSQL did not start; see tests/artifacts/chaos/postgres.log") from None
                time.sleep(0.2)

    def _processes(self) -> list[psutil.Process]:
        try:
            postmaster = psutil.Process(int((self.data / "postmaster.pid").read_text().split()[0]))
            return [postmaster, *postmaster.children(recursive=True)]
        except (OSError, ValueError, IndexError, psutil.NoSuchProcess):
            return []

    def crash(self) -> None:
        """SIGKILL the postmaster and every backend at once, as when its machine or container is
        killed: no shutdown checkpoint, open connections cut, crash recovery at the next start."""
        procs = self._processes()
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        deadline = time.monotonic() + 30
        while any(_alive(proc) for proc in procs) and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        procs = self._processes()
        if procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                procs[0].send_signal(signal.SIGINT)  # fast shutdown
            _, alive = psutil.wait_procs(procs, timeout=30)
            for proc in alive:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


class Stack:
    WORKERS = (("cpu", 2), ("layout", 1), ("ocr", 2))

    def __init__(self, hosts: int = 0) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="ocr-chaos-"))
        self.redis_port = free_port()
        self.web_port = free_port()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        # Logs are appended to (a restarted worker keeps its file): start from none, or the "claim
        # lost" counts would include an earlier run's.
        for old in ARTIFACTS.glob("*.log"):
            old.unlink()
        tag = str(os.getpid() % 100000)
        self.hosts = [worker_hosts.WorkerHost(i + 1, tag, net=200 + os.getpid() % 50) for i in range(hosts)]
        self.listen = ("127.0.0.1", *(h.gateway for h in self.hosts))
        self.postgres = Postgres(self.listen)
        self.database_url = self.postgres.url("ocr_chaos")
        self.procs: dict[str, subprocess.Popen] = {}
        self.redis: subprocess.Popen | None = None
        self.env = {
            **os.environ,
            # Persistent connections with health checks, as deployed (the settings' defaults): a
            # restart of the server must not need a restart of web or workers.
            "DATABASE_URL": self.database_url,
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "OCR_MEDIA_ROOT": str(self.tmp / "media"),
            "OCR_SWEEP_EVERY": "5",
            # A claim older than this is re-sent; well above a page's OCR time on a loaded box.
            "OCR_STALE_AFTER": str(STALE_AFTER_S),
            "OCR_TASK_SOFT_LIMIT": "90",
            "OCR_TASK_HARD_LIMIT": "120",
            "OCR_ENGINE_THREADS": "1",
            # Limits on but out of reach: the door counts in Redis as in production, so a Redis
            # outage shows what clients really get (503 busy:unavailable), not an unlimited door.
            "OCR_RATE_SUBMISSIONS": "1000000/min",
            "OCR_RATE_POLLS": "1000000/min",
            "OCR_QUOTA_PAGES_PER_DAY": "100000000",
            "OCR_BACKPRESSURE_PAGES": "0",
            "PYTHONUNBUFFERED": "1",
        }

    # Redis -------------------------------------------------------------------------------------
    def start_redis(self) -> None:
        log = (ARTIFACTS / "redis.log").open("a")
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", *self.listen]
            + ["--protected-mode", "no", "--save", "", "--appendonly", "no"],
            cwd=self.tmp,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_port(self.redis_port)

    def kill_redis(self) -> None:
        assert self.redis is not None
        self.redis.kill()
        self.redis.wait()

    # PostgreSQL --------------------------------------------------------------------------------
    def fresh_database(self) -> None:
        self.postgres.init()
        self.postgres.start()
        with psycopg.connect(self.postgres.url("postgres"), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "ocr_chaos"')
        self.manage("migrate", "--verbosity", "0")

    def manage(self, *args: str) -> str:
        out = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True, check=False
        )
        if out.returncode:
            raise RuntimeError(f"manage.py {' '.join(args)}: {out.stderr[-2000:]}")
        return out.stdout.strip()

    # processes ---------------------------------------------------------------------------------
    def spawn(self, name: str, cmd: list[str]) -> None:
        log = (ARTIFACTS / f"{name}.log").open("a")
        self.procs[name] = subprocess.Popen(
            cmd, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def start_worker(self, queue_name: str, concurrency: int) -> None:
        cmd = [sys.executable, "-m", "celery", "-A", "ocrsite", "worker", "-Q", queue_name]
        cmd += ["-n", f"{queue_name}@chaos", "--concurrency", str(concurrency), "--loglevel", "INFO"]
        self.spawn(queue_name, cmd)

    HOST_WORKERS = (("cpu", 1), ("layout", 1), ("ocr", 1))

    def start_host_worker(self, host: worker_hosts.WorkerHost, queue_name: str, concurrency: int) -> None:
        """A worker inside ``host``'s namespace, reaching Redis and PostgreSQL by its gateway."""
        gw = host.gateway
        env = {
            **self.env,
            "DATABASE_URL": f"postgres://postgres@{gw}:{self.postgres.port}/ocr_chaos",
            "CELERY_BROKER_URL": f"redis://{gw}:{self.redis_port}/0",
        }
        cmd = [sys.executable, "-m", "celery", "-A", "ocrsite", "worker", "-Q", queue_name]
        cmd += ["-n", f"{queue_name}@{host.name}", "--concurrency", str(concurrency), "--loglevel", "INFO"]
        name = f"{host.name}-{queue_name}"
        log = (ARTIFACTS / f"{name}.log").open("a")
        self.procs[name] = subprocess.Popen(
            host.command(cmd), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def start(self) -> None:
        for host in self.hosts:
            host.create()
        self.start_redis()
        self.fresh_database()
        bin_dir = Path(sys.executable).parent
        self.spawn(
            "web",
            [str(bin_dir / "gunicorn"), "ocrsite.wsgi:application", "--bind", f"127.0.0.1:{self.web_port}"]
            + ["--workers", "2", "--worker-class", "gthread", "--threads", "8", "--timeout", "120"],
        )
        for queue_name, concurrency in self.WORKERS:
            self.start_worker(queue_name, concurrency)
        for host in self.hosts:
            for queue_name, concurrency in self.HOST_WORKERS:
                self.start_host_worker(host, queue_name, concurrency)
        schedule = str(self.tmp / "beat-schedule")
        self.spawn("beat", [sys.executable, "-m", "celery", "-A", "ocrsite", "beat", "-s", schedule, "-l", "INFO"])
        wait_port(self.web_port)

    def stop(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        if self.redis and self.redis.poll() is None:
            self.kill_redis()
        self.postgres.stop()
        for host in self.hosts:
            host.heal()
            host.destroy()
        shutil.rmtree(self.tmp, ignore_errors=True)


# --- clients -----------------------------------------------------------------------------------


class Figures:
    """What the clients got: each answer's status (a 503 with its code), over the whole run and,
    by method, within the outage in progress when it came (``window``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: dict[str, int] = {}
        self.window: str | None = None
        self.windows: dict[str, dict[str, int]] = {}
        self.last_seen: dict[str, float] = {}

    def count(self, what: str, method: str) -> None:
        with self.lock:
            self.statuses[what] = self.statuses.get(what, 0) + 1
            self.last_seen[what] = time.monotonic()
            if self.window:
                seen = self.windows.setdefault(self.window, {})
                seen[f"{method} {what}"] = seen.get(f"{method} {what}", 0) + 1


def request(session: requests.Session, figures: Figures, method: str, url: str, **kw) -> requests.Response | None:
    try:
        resp = session.request(method, url, timeout=60, **kw)
    except requests.RequestException:
        figures.count("connection-error", method)
        return None
    what = str(resp.status_code)
    if resp.status_code == 503:
        try:
            what += " " + resp.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            what += " (no error code)"
    figures.count(what, method)
    return resp


def submit(base: str, key: str, doc: Doc, figures: Figures, stop: threading.Event) -> None:
    session = requests.Session()
    headers = {"X-API-Key": key, "Idempotency-Key": doc.key}
    while not stop.is_set():
        doc.submit_tries += 1
        files = {"file": (f"doc{doc.index}.{'pdf' if doc.kind == 'pdf' else 'tif'}", doc.data)}
        resp = request(session, figures, "POST", f"{base}/api/v1/jobs", headers=headers, files=files)
        if resp is not None and resp.status_code in (200, 202):
            doc.job_id = resp.json()["id"]
            return
        if resp is not None and resp.status_code < 500 and resp.status_code != 429:
            doc.problems.append(f"submission refused: {resp.status_code} {resp.text[:200]}")
            return
        wait = float(resp.headers.get("Retry-After", 1)) if resp is not None else 1.0
        time.sleep(min(wait, 5) * random.uniform(0.5, 1.0))


def poll(base: str, key: str, docs: list[Doc], figures: Figures, deadline: float, every_s: float = 1.0) -> None:
    session = requests.Session()
    headers = {"X-API-Key": key}
    waiting = [d for d in docs if d.job_id]
    while waiting and time.monotonic() < deadline:
        doc = waiting.pop(0)
        resp = request(session, figures, "GET", f"{base}/api/v1/jobs/{doc.job_id}", headers=headers)
        if resp is not None and resp.status_code == 200 and resp.json()["status"] in ("done", "failed", "cancelled"):
            doc.status = resp.json()["status"]
            if doc.status != "done":
                doc.problems.append(f"ended {doc.status}: {resp.json().get('error')}")
                continue
            md = request(
                session, figures, "GET", f"{base}/api/v1/jobs/{doc.job_id}/result?format=markdown", headers=headers
            )
            js = request(
                session, figures, "GET", f"{base}/api/v1/jobs/{doc.job_id}/result?format=json", headers=headers
            )
            if md is None or js is None or md.status_code != 200 or js.status_code != 200:
                doc.status = ""  # try again
                waiting.append(doc)
                continue
            doc.problems += check_result(doc, md.text, js.json())
            continue
        waiting.append(doc)
        # One poll every ``every_s`` per client (the size's): the polls must not become the load.
        time.sleep(every_s if len(waiting) > 1 else 0.5)
    for doc in waiting:
        doc.problems.append("not terminal before the drain deadline")


def watcher(base: str, key: str, docs: list[Doc], figures: Figures, stop: threading.Event, seed: int) -> None:
    """A dashboard beside the clients: reads accepted jobs and the job list twice a second all
    run long, so each outage meets reads as well as submissions (the clients submit everything
    before they poll)."""
    session = requests.Session()
    headers = {"X-API-Key": key}
    rng = random.Random(seed)
    while not stop.wait(0.5):
        ids = [d.job_id for d in docs if d.job_id]
        if ids and rng.random() < 0.7:
            request(session, figures, "GET", f"{base}/api/v1/jobs/{rng.choice(ids)}", headers=headers)
        else:
            request(session, figures, "GET", f"{base}/api/v1/jobs", headers=headers)


# --- faults ------------------------------------------------------------------------------------


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


def accepted(docs: list[Doc]) -> int:
    return sum(1 for d in docs if d.job_id)


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


# --- the run -----------------------------------------------------------------------------------


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
    for failure in failures:
        print("chaos: FAILED:", failure, file=sys.stderr)
    print("chaos: ok" if not failures else "chaos: see tests/artifacts/chaos/*.log", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
