"""Shared fixtures: real PostgreSQL, real Redis, a real Celery worker process.

Run through ``make test``, which starts the services and sets the environment below. Pipeline
tests use ``transactional_db`` so that what they commit is visible to the worker process.

Tests that use none of that are marked ``fast`` as they are collected, wherever they live, and
``make test-fast`` (``-m fast``) runs them with no database server and no broker. Tests under
``tests/unit/`` must be such tests: one there that asks for either is refused at collection.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from celery import current_app
from django.conf import settings
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.api.models import Tenant, TenantAPIKey, TenantUser
from tests.support.documents import ARTIFACTS, ROOT
from tests.support.queues import Broker

UNIT = ROOT / "tests" / "unit"
# A test that takes any of these (directly or through another fixture), or is marked django_db,
# talks to the database, Redis or a worker process: the stack `make test` starts.
STACK_FIXTURES = frozenset(
    {
        "db",
        "transactional_db",
        "django_db_setup",
        "django_db_reset_sequences",
        "live_server",
        "admin_user",
        "admin_client",
        "broker_url",
        "redis_client",
        "start_worker",
        "worker",
        "user",
        "api",
        "live_api",
    }
)


def _flush_retried_on_deadlock(teardown: Callable) -> Callable:
    """A transactional test's flush (TRUNCATE of every table) can deadlock with the session's
    worker process, which may still be writing rows of an earlier test or running its sweep:
    PostgreSQL then cancels one side. The flush is repeated (the worker's side has finished by
    then) rather than failing a test that passed. Seen once in `make test` (2026-12-06)."""

    def flush(self) -> None:
        for attempt in range(3):
            try:
                teardown(self)
                return
            except Exception as exc:
                chain, deadlock = exc, False
                while chain is not None and not deadlock:
                    deadlock = "deadlock detected" in str(chain)
                    chain = chain.__cause__ or chain.__context__
                if not deadlock or attempt == 2:
                    raise
                time.sleep(0.5 * (attempt + 1))

    return flush


def pytest_configure(config) -> None:
    from django.test import TransactionTestCase

    TransactionTestCase._fixture_teardown = _flush_retried_on_deadlock(TransactionTestCase._fixture_teardown)


# Marked tests that `make test-fast` leaves to `make test`: they take long, or need a GPU, a vLLM
# server or a browser.
NOT_FAST_MARKERS = ("slow", "gpu", "vllm", "browser")


def needs_the_stack(item: pytest.Item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(STACK_FIXTURES & set(item.fixturenames))


def is_fast(item: pytest.Item) -> bool:
    """The fast tier is a property, not a folder: no database, no broker, no worker, not slow."""
    return not needs_the_stack(item) and not any(item.get_closest_marker(m) for m in NOT_FAST_MARKERS)


def pytest_itemcollected(item: pytest.Item) -> None:
    # Marked as collected, before -m selects: `make test-fast` is `pytest tests -m fast`.
    if is_fast(item):
        item.add_marker(pytest.mark.fast)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what will not run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    stack = [item for item in items if needs_the_stack(item)]
    if misplaced := [item.nodeid for item in stack if item.path.is_relative_to(UNIT)]:
        raise pytest.UsageError(
            "tests/unit/ is for tests without a database, a broker or a worker (make test-fast); "
            f"move these next to the other stack tests in tests/: {', '.join(misplaced)}"
        )
    if stack and "postgresql" not in settings.DATABASES["default"]["ENGINE"]:
        raise pytest.UsageError(
            f"{len(stack)} of the selected tests (e.g. {stack[0].nodeid}) need PostgreSQL and Redis shared "
            "with a worker process: run `make test` (it starts them and sets DATABASE_URL, "
            "CELERY_BROKER_URL, OCR_MEDIA_ROOT), or `make test-fast` for the tests that need neither."
        )


# `slow` is a measured property (pyproject: more than 2 s on a 2-core machine). A fast test that
# runs well past it is named at the end of the run, so the tier stays fast by rule, not by review.
FAST_CALL_LIMIT_S = 3.0
_overdue: list[tuple[float, str]] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Reports from xdist processes arrive here too, with their keywords.
    if report.when == "call" and "fast" in report.keywords and report.duration > FAST_CALL_LIMIT_S:
        _overdue.append((report.duration, report.nodeid))


def pytest_terminal_summary(terminalreporter) -> None:
    if _overdue:
        terminalreporter.section("fast tests over the slow line")
        for duration, nodeid in sorted(_overdue, reverse=True):
            terminalreporter.write_line(f"{duration:5.1f} s  {nodeid}  (mark it slow, or make it cheaper)")


@pytest.fixture(scope="session")
def broker_url() -> str:
    return settings.CELERY_BROKER_URL


@pytest.fixture(scope="session")
def redis_client(broker_url: str) -> redis.Redis:
    return redis.Redis.from_url(broker_url)


class WorkerProcess:
    def __init__(self, proc: subprocess.Popen, log: Path) -> None:
        self.proc = proc
        self.log = log

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def tail(self, n: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text().splitlines()[-n:])
        except OSError:
            return ""


def _worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    env.update(
        {
            # pytest-django renamed the database to the test database: the worker must use it too.
            "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "OCR_MEDIA_ROOT": str(settings.MEDIA_ROOT),
            "DATABASE_CONN_MAX_AGE": "0",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env


@pytest.fixture(scope="session")
def start_worker(django_db_setup, django_db_blocker, redis_client) -> Iterator[Callable[..., WorkerProcess]]:
    """Factory: start a real ``celery worker`` process against the test database and broker."""
    started: list[WorkerProcess] = []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def start(
        queues: str = "cpu,layout,ocr,webhooks",
        concurrency: int = 2,
        env: dict[str, str] | None = None,
        name: str | None = None,
        pool: str | None = None,
    ) -> WorkerProcess:
        name = name or f"test-{uuid.uuid4().hex[:6]}"
        log = ARTIFACTS / f"worker-{name}.log"
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "ocrsite",
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
            # Test-only faults (OCR_FAIL_PAGES in ``env``) live with the tests, not in workers/.
            "--include",
            "tests.support.faults",
            *(["--pool", pool] if pool else []),
        ]
        fh = log.open("w")
        proc = subprocess.Popen(cmd, cwd=ROOT, env=_worker_env(env), stdout=fh, stderr=subprocess.STDOUT)
        worker = WorkerProcess(proc, log)
        started.append(worker)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited with {proc.returncode}:\n{worker.tail()}")
            if "ready." in log.read_text():
                return worker
            time.sleep(0.2)
        raise RuntimeError(f"worker did not become ready:\n{worker.tail()}")

    # Start from empty queues: leftovers of an earlier run must not leak into this one.
    redis_client.flushdb()
    yield start
    for worker in started:
        worker.stop()


@pytest.fixture(scope="session")
def worker(start_worker) -> WorkerProcess:
    """One shared worker consuming every queue, as the local stack runs it."""
    return start_worker(name="shared")


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user(username=f"u-{uuid.uuid4().hex[:8]}", password="pw")


@pytest.fixture
def api(user) -> APIClient:
    """A client for ``user``, linked on purpose to a tenant of the same name (usernames alone are
    not tenants: see apps.api.auth), so ``Job.tenant == user.username`` for its jobs."""
    tenant, _ = Tenant.objects.get_or_create(slug=user.username)
    TenantUser.objects.get_or_create(user=user, defaults={"tenant": tenant})
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


class LiveApi:
    """The web app served over real HTTP (pytest-django's ``live_server``) with a real worker behind
    it, and an API key for a fresh tenant: what the client, CLI and MCP servers talk to."""

    def __init__(self, url: str, tenant: str, key: str) -> None:
        self.url = url
        self.tenant = tenant
        self.key = key

    def env(self) -> dict[str, str]:
        return {**os.environ, "OCR_BASE_URL": self.url, "OCR_API_KEY": self.key, "PYTHONUNBUFFERED": "1"}


@pytest.fixture
def live_api(live_server, worker, transactional_db, redis_client) -> Iterator[LiveApi]:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    _, key = TenantAPIKey.objects.create_key(name=tenant, tenant=tenant)
    yield LiveApi(live_server.url, tenant, key)
    # The database is flushed after the test: the worker must be done writing to it first.
    Broker(current_app, redis_client).wait_idle()
