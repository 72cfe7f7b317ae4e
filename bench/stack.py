"""The real local stack for the pipeline and ingest benchmarks: PostgreSQL database ``ocr_bench``, Redis db 2, media in
/tmp/media_bench, gunicorn on 127.0.0.1 and celery workers, each a subprocess of the benchmark.

Its own database, Redis db and media folder keep the benchmark off the tests' data; every
process it starts it also stops (by its own handle, never by name).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.common import ROOT

DB_NAME = os.environ.get("BENCH_DB_NAME", "ocr_bench")
DB_URL = os.environ.get("BENCH_DATABASE_URL", f"postgres://postgres@127.0.0.1:5432/{DB_NAME}")
BROKER_URL = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/2")
MEDIA = Path(os.environ.get("BENCH_MEDIA_ROOT", "/tmp/media_bench"))
LOGS = ROOT / "bench" / "results" / "logs"
BIN = Path(sys.executable).parent


def env(**extra: str) -> dict[str, str]:
    """Environment for every stack process. One tenant sends all the load, so its per-tenant
    rate limits and daily quota are lifted: the benchmark measures throughput, not the door's
    spending controls (backpressure stays on, with its default threshold raised above the load)."""
    out = dict(os.environ)
    out.update(
        {
            "DJANGO_SETTINGS_MODULE": "ocrsite.settings",
            "DATABASE_URL": DB_URL,
            "CELERY_BROKER_URL": BROKER_URL,
            "OCR_MEDIA_ROOT": str(MEDIA),
            "OCR_RATE_SUBMISSIONS": "",
            "OCR_RATE_POLLS": "",
            "OCR_QUOTA_PAGES_PER_DAY": "0",
            "OCR_BACKPRESSURE_PAGES": "1000000",
            "PYTHONUNBUFFERED": "1",
        }
    )
    out.update(extra)
    return out


def redis_client():
    import redis

    return redis.Redis.from_url(BROKER_URL)


def reset() -> None:
    """Empty this benchmark's own Redis db and media folder (never another db)."""
    redis_client().flushdb()
    shutil.rmtree(MEDIA, ignore_errors=True)
    MEDIA.mkdir(parents=True, exist_ok=True)


def prepare_database() -> str:
    """Create ``ocr_bench`` if missing, migrate it, and return a DRF token for a bench user."""
    host = subprocess.run(
        ["psql", "-h", "127.0.0.1", "-U", "postgres", "-tAc", f"select 1 from pg_database where datname='{DB_NAME}'"],
        capture_output=True,
        text=True,
    )
    if host.returncode != 0:
        raise RuntimeError(f"PostgreSQL on 127.0.0.1:5432 is not reachable: {host.stderr.strip()}")
    if host.stdout.strip() != "1":
        subprocess.run(
            ["psql", "-h", "127.0.0.1", "-U", "postgres", "-c", f"create database {DB_NAME}"],
            check=True,
            capture_output=True,
        )
    manage = [str(BIN / "python"), "manage.py"]
    subprocess.run([*manage, "migrate", "--verbosity", "0"], cwd=ROOT, env=env(), check=True)
    script = (
        "from django.contrib.auth import get_user_model; from rest_framework.authtoken.models import Token; "
        "from apps.api.models import Tenant, TenantUser; "
        "u, _ = get_user_model().objects.get_or_create(username='bench'); "
        # API users act for a tenant only through an explicit link (apps.api.models.TenantUser).
        "t, _ = Tenant.objects.get_or_create(slug='bench'); "
        "TenantUser.objects.get_or_create(user=u, defaults={'tenant': t}); "
        "print(Token.objects.get_or_create(user=u)[0].key)"
    )
    out = subprocess.run(
        [*manage, "shell", "-c", script], cwd=ROOT, env=env(), check=True, capture_output=True, text=True
    )
    return out.stdout.strip().splitlines()[-1]


def purge_jobs() -> None:
    """Drop the bench database's jobs so every run starts from the same empty tables."""
    script = "from apps.jobs.models import Job; Job.objects.all().delete()"
    subprocess.run([str(BIN / "python"), "manage.py", "shell", "-c", script], cwd=ROOT, env=env(), check=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A subprocess in its own process group, with its log under bench/results/logs/."""

    def __init__(self, name: str, cmd: list[str] | str, environ: dict[str, str], shell: bool = False) -> None:
        LOGS.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.log = LOGS / f"{name}.log"
        self.cmd = cmd
        fh = self.log.open("w")
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=environ,
            stdout=fh,
            stderr=subprocess.STDOUT,
            shell=shell,
            start_new_session=True,
            executable="/bin/bash" if shell else None,
        )

    def tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 20) -> None:
        if self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)  # our own session: the process and its children
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


def procfile_web(port: int) -> str:
    """The Procfile's web line with the bench port: the pipeline benchmark measures the web server as deployed."""
    for line in (ROOT / "compose" / "Procfile").read_text().splitlines():
        if line.startswith("web:"):
            return line.split(":", 1)[1].strip().replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    raise RuntimeError("Procfile has no web line")


def start_web(cmd: str, port: int, name: str = "web", environ: dict[str, str] | None = None) -> Proc:
    proc = Proc(name, cmd, environ or env(), shell=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{cmd} exited:\n{proc.tail()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.stop()
    raise RuntimeError(f"{cmd} did not answer /healthz:\n{proc.tail()}")


def start_worker(
    concurrency: int,
    environ: dict[str, str],
    name: str = "bench",
    queues: str = "cpu,layout,ocr,webhooks",
    app: str = "ocrsite",
) -> Proc:
    """One worker consuming ``queues`` (default: every queue) with ``concurrency`` prefork
    children. Log level INFO as in the Procfile; "ready." in its log is the signal it consumes.
    ``app`` is the Celery app module (the pipeline benchmark passes bench.celery_warm: the product's app plus a
    note of which child ran which task)."""
    cmd = [
        str(BIN / "celery"),
        "-A",
        app,
        "worker",
        "-Q",
        queues,
        "-n",
        f"{name}@%h",
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "INFO",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    proc = Proc(f"worker-{name}", cmd, environ)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"worker exited:\n{proc.tail()}")
        if "ready." in proc.log.read_text(errors="replace"):
            return proc
        time.sleep(0.3)
    proc.stop()
    raise RuntimeError(f"worker did not become ready: {shlex.join(cmd)}\n{proc.tail()}")
