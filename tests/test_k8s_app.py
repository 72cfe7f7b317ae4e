"""The manifests against the real app: kubelet's probes through gunicorn with the web pod's
settings, and the vLLM ScaledObject's PostgreSQL query against the real schema.

Reads the YAML in k8s/base directly (no kubectl needed), so it runs in the app's test suite.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from django.conf import settings
from django.db import connection

from apps.jobs.models import Job, Page
from tests import k8s_manifests as m

BASE = m.K8S / "base"
POD_IP = "10.244.3.17"


def _doc(filename: str, kind: str, name: str) -> dict:
    docs = [d for d in yaml.safe_load_all((BASE / filename).read_text()) if d]
    return m.find(docs, kind, name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _database_url() -> str:
    db = settings.DATABASES["default"]  # the test database pytest-django created
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def web_pod(db, tmp_path):
    """gunicorn started as the web Deployment starts it, with the ConfigMap's environment and
    POD_IP from the downward API. Only what cannot exist here is swapped: the Secret's files (a
    temp dir with the same key names), the broker, database and media paths (this run's services),
    the bind address (a free local port) and the worker count (1, to spare the CI machine)."""
    container = _doc("web.yaml", "Deployment", "web")["spec"]["template"]["spec"]["containers"][0]
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "database-url").write_text(_database_url())
    (secrets / "broker-url").write_text(settings.CELERY_BROKER_URL)
    (secrets / "django-secret-key").write_text("k8s-probe-test-" + "x" * 40)
    (secrets / "vllm-api-key").write_text("test-key")
    (secrets / "metrics-token").write_text("test-token")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "OCR_", "CELERY_", "DATABASE_"))}
    for key, value in m.env_file(BASE / "config.env").items():
        env[key] = value.replace("/secrets/", f"{secrets}/")
    for var in container["env"]:
        assert var["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
        env[var["name"]] = POD_IP
    env["OCR_MEDIA_ROOT"] = str(tmp_path / "media")
    port = _free_port()
    argv = list(container["command"])
    argv[argv.index("--bind") + 1] = f"127.0.0.1:{port}"
    argv[argv.index("--workers") + 1] = "1"
    argv[argv.index("--worker-tmp-dir") + 1] = str(tmp_path)
    argv[0] = str(Path(sys.executable).with_name("gunicorn"))
    proc = subprocess.Popen(argv, cwd=m.ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"gunicorn exited: {proc.stdout.read().decode()[-3000:]}")
                time.sleep(0.2)
        yield port, container
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _probe(port: int, path: str, host: str) -> http.client.HTTPResponse:
    """What kubelet's httpGet probe sends: plain HTTP, Host = <pod IP>:<container port>."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", path, headers={"Host": host, "User-Agent": "kube-probe/1.31"})
    resp = conn.getresponse()
    resp.read()
    return resp


@pytest.mark.slow
def test_kubelet_probes_reach_the_web_pod(web_pod):
    port, container = web_pod
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        resp = _probe(port, get["path"], f"{POD_IP}:{get['port']}")
        # Not 400 (DisallowedHost), not 301 (DJANGO_SECURE's HTTPS redirect): 200.
        assert resp.status == 200, (probe, resp.status, resp.getheader("Location"))
    # Only the pod's own address is allowed, not any IP: another pod's is still refused.
    assert _probe(port, "/healthz", "10.244.3.18:8000").status == 400
    # And the rest of the site still redirects plain HTTP to HTTPS.
    assert _probe(port, "/api/v1/jobs", "ocr.example.internal").status == 301


def _vllm_trigger(trigger_type: str) -> dict:
    spec = _doc("keda.yaml", "ScaledObject", "vllm")["spec"]
    return next(t for t in spec["triggers"] if t["type"] == trigger_type)


def _count(query: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(query)
        return cursor.fetchone()[0]


def test_vllm_wakes_on_one_page_waiting_in_postgresql(db):
    # Every engine recognises on vLLM in this deployment; the query counts on that.
    assert m.env_file(BASE / "config.env")["OCR_RECOGNIZER"] == "vllm"
    trigger = _vllm_trigger("postgresql")
    query = trigger["metadata"]["query"]
    assert _count(query) == 0
    assert not m.trigger_active(trigger, _count(query))

    job = Job.objects.create(kind="pdf", sha256="0" * 64, status=Job.Status.RUNNING, engine="gpu", page_count=2)
    page = Page.objects.create(job=job, index=0, status=Page.Status.QUEUED)
    Page.objects.create(job=job, index=1, status=Page.Status.DONE)
    assert _count(query) == 1
    assert m.trigger_active(trigger, _count(query)), "one page waiting must wake vLLM from zero"

    for status in (Page.Status.DETECTED, Page.Status.RECOGNIZING):
        Page.objects.filter(pk=page.pk).update(status=status)
        assert _count(query) == 1, status
    Page.objects.filter(pk=page.pk).update(status=Page.Status.DONE)
    assert not m.trigger_active(trigger, _count(query)), "nothing left: vLLM may sleep"

    # A cancelled job's leftover pages do not keep a GPU awake.
    Page.objects.filter(pk=page.pk).update(status=Page.Status.QUEUED)
    Job.objects.filter(pk=job.pk).update(status=Job.Status.CANCELLED)
    assert _count(query) == 0


def _worker_trigger(name: str) -> dict:
    spec = _doc("keda.yaml", "ScaledObject", name)["spec"]
    return next(t for t in spec["triggers"] if t["type"] == "postgresql")


def test_worker_tiers_count_pages_waiting_in_flight_and_waiting_to_retry(db):
    """Each worker tier's trigger, run against PostgreSQL: a page counts for layout from queued
    through detecting, for ocr from detected through recognizing (a page whose claim was handed
    back, or that waits out a retry's countdown, is back at waiting and still counts), and for
    neither once done or once its job is cancelled. A Redis list saw none of the claimed pages."""
    layout, ocr = _worker_trigger("worker-layout"), _worker_trigger("worker-ocr")
    counts = lambda: (_count(layout["metadata"]["query"]), _count(ocr["metadata"]["query"]))  # noqa: E731
    assert counts() == (0, 0)
    job = Job.objects.create(kind="pdf", sha256="0" * 64, status=Job.Status.RUNNING, engine="gpu", page_count=1)
    page = Page.objects.create(job=job, index=0, status=Page.Status.QUEUED)
    expected = {
        Page.Status.QUEUED: (1, 0),
        Page.Status.DETECTING: (1, 0),  # in flight in a layout worker: invisible to its list
        Page.Status.DETECTED: (0, 1),
        Page.Status.RECOGNIZING: (0, 1),  # in flight in an ocr worker
        Page.Status.DONE: (0, 0),
    }
    for status, want in expected.items():
        Page.objects.filter(pk=page.pk).update(status=status, attempts=2)
        assert counts() == want, status
        assert m.trigger_active(ocr, counts()[1]) == bool(want[1]), status
    Page.objects.filter(pk=page.pk).update(status=Page.Status.RECOGNIZING)
    Job.objects.filter(pk=job.pk).update(status=Job.Status.CANCELLED)
    assert counts() == (0, 0)

    cpu = _worker_trigger("worker-cpu")["metadata"]["query"]
    Job.objects.create(kind="pdf", sha256="1" * 64, status=Job.Status.QUEUED, engine="gpu")
    splitting = Job.objects.create(kind="pdf", sha256="2" * 64, status=Job.Status.RUNNING, engine="gpu", page_count=3)
    Page.objects.create(job=splitting, index=0)
    assert _count(cpu) == 2  # one waiting for ingest, one still being split into pages
