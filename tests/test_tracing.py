"""One trace per job, over OTLP, from the web request to assembly; nothing sent when unset.

The web is a real gunicorn process and the worker a real Celery worker, both configured only by
the standard OTEL_* variables. What receives the spans:

- a real trace collector, Arize Phoenix (``.venv-phoenix``, installed by ``.ci/phoenix.sh`` from
  PyPI): its OTLP/HTTP receiver takes the export and its REST API gives the job's trace back, as an
  operator would find it in its viewer. The compose profile's Jaeger and the OpenTelemetry
  Collector ship only as Go binaries and images, which this machine cannot install or build;
- an OTLP/HTTP receiver in this process that decodes the protobuf requests, for what a collector
  cannot show: that nothing at all is sent when OTEL_* is unset, and the span attributes exactly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from celery import current_app
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from apps.api.models import TenantAPIKey
from apps.jobs.models import Job
from ocrsite import telemetry
from tests.conftest import _worker_env
from tests.support.documents import ARTIFACTS, ROOT, dev_file
from tests.support.object_stores import _free_port
from tests.support.queues import Broker


class Receiver:
    """Spans as a collector's OTLP/HTTP receiver gets them: (trace id, name, attributes). Listens
    on 4318, the SDK's default, when it is free: a process that exported without being asked
    would send there."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, dict]] = []
        self.requests = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests += 1
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        for span in scope.spans:
                            attrs = {a.key: a.value.string_value or a.value.int_value for a in span.attributes}
                            receiver.spans.append((span.trace_id.hex(), span.name, attrs))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        try:
            self.server = ThreadingHTTPServer(("127.0.0.1", 4318), Handler)
        except OSError:
            self.server = ThreadingHTTPServer(("127.0.0.1", _free_port()), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def _start(cmd: list[str], env: dict[str, str], name: str, ready) -> subprocess.Popen:
    log = ARTIFACTS / f"{name}.log"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300  # a loaded shared machine takes minutes to start a worker
    while not ready(log):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{name} did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.3)
    return proc


def _stack(env: dict[str, str], tag: str) -> tuple[list[subprocess.Popen], str]:
    port = _free_port()
    web = _start(
        [sys.executable, "-m", "gunicorn", "ocrsite.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1"],
        env,
        f"tracing-web-{tag}",
        lambda log: _answers(port),
    )
    queue = f"tracing-{tag}-{uuid.uuid4().hex[:4]}"
    try:
        worker = _start(
            [sys.executable, "-m", "celery", "-A", "ocrsite", "worker", "-Q", "cpu,layout,ocr", "-n", f"{queue}@%h"]
            + [
                "--concurrency",
                "1",
                "--loglevel",
                "INFO",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            env,
            f"tracing-worker-{tag}",
            lambda log: "ready." in log.read_text(),
        )
    except RuntimeError:
        _stop([web])  # a worker that did not start must not leave the web running
        raise
    return [web, worker], f"http://127.0.0.1:{port}"


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _run_job(url: str, key: str) -> str:
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=60) as client:
        resp = client.post("/api/v1/jobs", files={"file": ("phototest.tif", dev_file("phototest.tif").read_bytes())})
        assert resp.status_code == 202, resp.text
        job_id = resp.json()["id"]
        deadline = time.monotonic() + 180
        while client.get(f"/api/v1/jobs/{job_id}").json()["status"] != "done":
            assert time.monotonic() < deadline, "the job did not finish"
            time.sleep(0.3)
    return job_id


def _stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.terminate()  # a worker's warm shutdown flushes its last spans (worker_process_shutdown)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _otel_free(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("OTEL_")}


@pytest.fixture
def broker(worker, redis_client) -> Broker:
    broker = Broker(current_app, redis_client)
    broker.wait_idle()
    return broker


def _traced(broker: Broker, env: dict[str, str], tag: str, key: str) -> str:
    """One job through a web and a worker started with ``env``; the session's shared worker is
    paused meanwhile (before these start), so this worker takes every message."""
    with broker.paused():
        procs, url = _stack(env, tag)
        try:
            return _run_job(url, key)
        finally:
            _stop(procs)


STAGES = {"ingest", "page.layout", "page.recognize", "assemble"}


def _one_trace_per_job(
    spans: Callable[[], list[tuple[str, dict]]], job_id: str, tenant: str, wait_s: float
) -> set[str]:
    """The names of the job's trace's spans (``spans``: (name, attributes) of each span received in
    that trace so far, polled until every stage is there or ``wait_s`` passes), checked: every stage,
    the web's POST in the same trace, and the stages carrying the job and the tenant."""
    deadline = time.monotonic() + wait_s
    while True:
        found = spans()
        names = {name for name, _ in found}
        if names >= STAGES or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert names >= STAGES, sorted(names)
    assert any(n.startswith("POST") for n in names), names
    for name, attrs in found:
        if name in STAGES:
            assert attrs["ocr.job_id"] == job_id and attrs["ocr.tenant"] == tenant, (name, attrs)
    return names


@pytest.mark.django_db(transaction=True)
def test_one_trace_per_job_from_web_to_assembly_and_nothing_when_unset(receiver, broker):
    tenant = f"trace-{uuid.uuid4().hex[:6]}"
    _, key = TenantAPIKey.objects.create_key(name=tenant, tenant=tenant)
    base = _otel_free(_worker_env())

    # Unset: the receiver sits on the OTLP default port's stand-in and hears nothing.
    off = {**base, "OCR_RESULT_CACHE": "false"}
    _traced(broker, off, "off", key)
    assert receiver.requests == 0
    assert not telemetry.enabled(off)

    on = {
        **off,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    job_id = _traced(broker, on, "on", key)
    trace_id = Job.objects.get(pk=job_id).traceparent.split("-")[1]
    names = _one_trace_per_job(
        lambda: [(name, attrs) for tid, name, attrs in receiver.spans if tid == trace_id], job_id, tenant, wait_s=30
    )
    # Celery, psycopg and Redis spans ride along in the job's trace.
    assert any("workers." in n or "run/" in n for n in names), names


PHOENIX = ROOT / ".venv-phoenix" / "bin" / "phoenix"


@pytest.fixture
def phoenix() -> Iterator[str]:
    """A running Phoenix with its own ports and store; yields its base URL (OTLP/HTTP is its
    /v1/traces, the REST API its /v1)."""
    if not PHOENIX.exists():
        built = subprocess.run(["bash", str(ROOT / ".ci" / "phoenix.sh")], capture_output=True, text=True, timeout=900)
        if built.returncode != 0:
            pytest.skip(f"Phoenix could not be installed (.ci/phoenix.sh): {built.stdout[-500:]}{built.stderr[-500:]}")
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="phoenix-") as home:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": home,
            "PHOENIX_WORKING_DIR": home,
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(_free_port()),
            "PHOENIX_TELEMETRY_ENABLED": "false",
        }
        proc = _start([str(PHOENIX), "serve"], env, "phoenix", lambda log: _answers(port))
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            _stop([proc])


def _spans_in(phoenix: str, trace_id: str) -> list[dict]:
    resp = httpx.get(f"{phoenix}/v1/projects/default/spans", params={"trace_id": trace_id, "limit": 1000}, timeout=10)
    if resp.status_code == 404:  # the project appears with the first span stored
        return []
    resp.raise_for_status()
    return resp.json()["data"]


@pytest.mark.django_db(transaction=True)
def test_a_real_collector_sees_one_trace_per_job(phoenix, broker):
    """The same job's trace, read back from a real collector's store: one trace from the web's
    POST to assembly, the stages carrying the job and the tenant."""
    tenant = f"trace-{uuid.uuid4().hex[:6]}"
    _, key = TenantAPIKey.objects.create_key(name=tenant, tenant=tenant)
    env = {**_otel_free(_worker_env()), "OCR_RESULT_CACHE": "false"}
    env.update(OTEL_EXPORTER_OTLP_ENDPOINT=phoenix, OTEL_BSP_SCHEDULE_DELAY="200")
    job_id = _traced(broker, env, "phoenix", key)
    trace_id = Job.objects.get(pk=job_id).traceparent.split("-")[1]

    def stored() -> list[tuple[str, dict]]:
        spans = _spans_in(phoenix, trace_id)
        assert all(s["context"]["trace_id"] == trace_id for s in spans)
        return [(s["name"], s["attributes"]) for s in spans]

    _one_trace_per_job(stored, job_id, tenant, wait_s=60)  # Phoenix writes spans to its store in batches
