"""Operators and jobs for console tests: an operator in the Operators group, a logged-in client,
jobs submitted or stored with real files, /metrics parsed, and a way to keep the shared worker out
of a test that starts workers of its own."""

from __future__ import annotations

import importlib
import io
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import numpy as np
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.files.base import ContentFile
from django.test import Client
from django.utils import timezone
from PIL import Image

from apps.jobs import services
from apps.jobs.documents import encode_png
from apps.jobs.models import Job, Page, Region
from ocrsite.celery import app as celery_app
from tests.support.documents import dev_file


def tiff_pages(n: int) -> bytes:
    """An n-page TIFF made of the classic phototest scan (a real document, small and quick to OCR)."""
    with Image.open(dev_file("phototest.tif")) as img:
        frame = img.convert("L")
    out = io.BytesIO()
    frame.save(out, format="TIFF", save_all=True, append_images=[frame.copy() for _ in range(n - 1)], dpi=(300, 300))
    return out.getvalue()


def submit_bytes(data: bytes, name: str, owner=None) -> Job:
    return services.submit(services.Upload(io.BytesIO(data), name, len(data)), owner=owner, tenant="acme")


def wait_status(job_id, statuses, timeout: float = 180, worker=None) -> Job:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = Job.objects.get(pk=job_id)
        if job.status in statuses:
            return job
        time.sleep(0.25)
    tail = worker.tail() if worker else ""
    raise AssertionError(f"job {job_id} is {Job.objects.get(pk=job_id).status}, not {statuses}\n{tail}")


def operators_group() -> Group:
    """The group migration 0003 creates. A transactional test's flush empties every table, the
    migration's rows too, so later tests get it back from the migration's own function."""
    group = Group.objects.filter(name="Operators").first()
    if group is None:
        migration = importlib.import_module("apps.jobs.migrations.0003_operators_group")
        migration.create_operators(django_apps, None)
        group = Group.objects.get(name="Operators")
    return group


def make_operator(password: str = "op-pass-123"):
    user = get_user_model().objects.create_user(username=f"op-{uuid.uuid4().hex[:6]}", password=password, is_staff=True)
    user.groups.add(operators_group())
    return user


def client_for(user) -> Client:
    client = Client(REMOTE_ADDR="127.0.0.1")
    client.force_login(user)
    return client


def scrape(client: Client | None = None, **headers) -> dict[tuple[str, tuple], float]:
    """/metrics parsed into {(name, sorted labels): value}."""
    client = client or Client(REMOTE_ADDR="127.0.0.1")
    resp = client.get("/metrics", **headers)
    assert resp.status_code == 200, resp.content[:300]
    out = {}
    for line in resp.content.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][\w:]*)(\{(.*)\})? (\S+)$", line)
        assert m, line
        labels = tuple(sorted(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or "")))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


@contextmanager
def workers_of_our_own() -> Iterator[None]:
    """Pause the consumers of any worker already running (the session's shared one, if an earlier
    test started it) so that only the workers this test starts, with the environment it chose,
    take its messages; give each its queues back afterwards. Nothing running: nothing to pause."""
    running = celery_app.control.inspect(timeout=3).active_queues() or {}
    paused = {name: [q["name"] for q in queues] for name, queues in running.items()}
    for name, queues in paused.items():
        for queue in queues:
            celery_app.control.cancel_consumer(queue, destination=[name], reply=True, timeout=5)
    if paused:  # each paused worker must say it consumes nothing before our messages go out
        deadline = time.monotonic() + 15
        while any((celery_app.control.inspect(destination=list(paused), timeout=2).active_queues() or {}).values()):
            assert time.monotonic() < deadline, f"workers {list(paused)} still consume"
    try:
        yield
    finally:
        for name, queues in paused.items():
            for queue in queues:
                celery_app.control.add_consumer(queue, destination=[name], reply=True, timeout=5)


def stored_job(
    status: str = "done", pages: int = 2, regions: int = 3, owner=None, error_code: str = "", duration_s: float = 5
) -> Job:
    """A finished job with real files in storage (no worker needed for console views)."""
    png = encode_png(np.full((400, 300, 3), 255, dtype=np.uint8))
    now = timezone.now()
    finished = now if status in Job.TERMINAL else None
    job = Job.objects.create(
        status=status,
        filename="stored.tif",
        kind="tiff",
        sha256="0" * 64,
        owner=owner,
        page_count=pages,
        pages_done=pages,
        error_code=error_code,
        error_message=error_code,
        started_at=now - timedelta(seconds=duration_s),
        finished_at=finished,
    )
    job.source.save(f"{job.pk}.tiff", ContentFile(b"II*\x00fake"), save=False)
    job.result_markdown = services.save_bytes(f"results/{job.pk}.md", b"# Title\n\nbody <script>x</script>\n")
    job.result_json = services.save_bytes(f"results/{job.pk}.json", b'{"pages": []}')
    job.save()
    for i in range(pages):
        page = Page.objects.create(
            job=job,
            index=i,
            status="done",
            width=300,
            height=400,
            dpi=72,
            image=services.save_bytes(f"pages/{job.pk}/{i:05d}.png", png),
        )
        for r in range(regions):
            Region.objects.create(
                page=page,
                order=r,
                label=["title", "text", "table"][r % 3],
                x0=10,
                y0=10 + r * 100,
                x1=290,
                y1=90 + r * 100,
                text=f"region {r}",
                status="done",
                confidence=0.3 if r == 0 else 0.95,
                flags=["loop-cut"] if r == 1 else [],
            )
    return job


def read_on_a_worker_of_our_own(api, start_worker, name: str, data: bytes, env: dict[str, str]) -> tuple[str, dict]:
    """Upload ``data`` (as ``name``) and wait for its job on a worker started here with ``env``,
    the running ones paused (``workers_of_our_own``): a deployment configured otherwise than the
    session's shared worker. The job's id and its final status."""
    from tests.support.jobs_api import upload, wait_for_job

    with workers_of_our_own():
        ours = start_worker(env=env, name=f"own-{name.replace('.', '-')}")
        resp = upload(api, name, data=data)
        assert resp.status_code == 202, resp.content
        job_id = resp.json()["id"]
        done = wait_for_job(api, job_id, timeout=600)
        ours.stop()
    return job_id, done
