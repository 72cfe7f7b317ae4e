"""The stack under test, started beside anything else on the machine: its own Redis, its own
PostgreSQL cluster (to crash and restart it), gunicorn, one worker per queue, beat, and worker
hosts in network namespaces (``hosts.py``)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import psycopg

from tests.chaos import hosts as worker_hosts
from tests.chaos.plan import ARTIFACTS, ROOT, STALE_AFTER_S


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
