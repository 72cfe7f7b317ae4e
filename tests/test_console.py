"""Operators' console without a browser: retry semantics through real workers, /metrics against
the run's counts, JSON logs, permissions, purge, page view and dashboard.

The browser walk-through is tests/test_console_browser.py.
"""

from __future__ import annotations

import base64
import importlib
import io
import json
import os
import re
import shlex
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from PIL import Image

from apps.jobs import services
from apps.jobs.documents import encode_png
from apps.jobs.models import Job, Page, Region, StageEvent
from ocrsite.celery import app as celery_app
from tests.conftest import dev_file
from tests.queues import Broker

FAIL_CODE = "engine:injected-fault"


# --- helpers -----------------------------------------------------------------------------------


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


def regions_of(page: Page) -> list[tuple[int, object, str]]:
    return list(Region.objects.filter(page=page).order_by("pk").values_list("pk", "updated_at", "text"))


@pytest.fixture
def broker(redis_client) -> Broker:
    return Broker(celery_app, redis_client)


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


@pytest.fixture
def fresh_metrics(settings):
    settings.METRICS_CACHE_SECONDS = 0
    settings.METRICS_TOKEN = ""


# --- retry semantics, metrics and logs through real workers --------------------------------------


@pytest.mark.django_db(transaction=True)
def test_retry_redoes_only_the_failed_page_and_metrics_follow(start_worker, broker, fresh_metrics):
    """A 3-page job whose page 2 fails (OCR_FAIL_PAGES=2 in the worker's environment) ends failed;
    with the cause removed (a worker without it), an operator's retry redoes page 2 alone: pages
    1 and 3 keep their region rows untouched, and the job finishes. /metrics counts both states,
    and the worker's JSON log lines carry job_id and page_id."""
    operator = make_operator()
    with workers_of_our_own():
        # No worker consumes yet: the ingest message waits in the cpu queue, and /metrics sees it.
        job = submit_bytes(tiff_pages(3), "three-pages.tif", owner=operator)
        waiting = scrape()
        assert waiting[("ocr_queue_depth", (("queue", "cpu"),))] == 1
        assert waiting[("ocr_queue_depth", (("queue", "layout"),))] == 0
        assert waiting[("ocr_jobs", (("status", "queued"),))] == 1
        assert waiting[("ocr_oldest_queued_age_seconds", (("queue", "cpu"),))] > 0
        failing = start_worker(env={"OCR_FAIL_PAGES": "2"}, name="console-failing")
        job = wait_status(job.pk, {"failed", "done"}, worker=failing)
        failing.stop()
        assert job.status == "failed", failing.tail()
        assert job.error_code == FAIL_CODE
        assert (job.pages_done, job.pages_failed, job.page_count) == (2, 1, 3)
        pages = {p.index: p for p in job.pages.all()}
        assert [pages[i].status for i in range(3)] == ["done", "failed", "done"]

        metrics = scrape()
        assert metrics[("ocr_jobs_failed_total", (("error_code", FAIL_CODE),))] == 1
        assert metrics[("ocr_pages_processed_total", (("engine", "cpu"), ("source", "ocr")))] == 2
        assert metrics[("ocr_pages_failed_total", (("engine", "cpu"), ("source", "ocr")))] == 1

        kept = {i: regions_of(pages[i]) for i in (0, 2)}
        assert kept[0] and kept[2], "finished pages must have regions"
        failed_before = {pk for pk, _, _ in regions_of(pages[1])}

        healthy = start_worker(env={"LOG_FORMAT": "json"}, name="console-healthy")
        resp = client_for(operator).post(reverse("admin:jobs_job_act", args=[job.pk, "retry"]))
        assert resp.status_code == 302
        job = wait_status(job.pk, {"done", "failed"}, worker=healthy)
        assert job.status == "done", healthy.tail()
        broker.wait_idle()
        healthy.stop()

    assert (job.pages_done, job.pages_failed) == (3, 0)
    for i in (0, 2):
        assert regions_of(pages[i]) == kept[i], f"page {i + 1} was touched by the retry"
    redone = regions_of(pages[1])
    assert redone and not ({pk for pk, _, _ in redone} & failed_before)
    assert "quick" in " ".join(text for _, _, text in redone).lower()
    # Only page 2 went through layout and recognition again.
    after = StageEvent.objects.filter(job=job, started_at__gte=job.events.get(stage="retry").started_at)
    assert {e.page_id for e in after.filter(stage__in=("layout", "recognize"))} == {pages[1].pk}
    retry_event = job.events.get(stage="retry")
    assert retry_event.actor == operator.username and retry_event.detail == {"pages": 1}
    with default_storage.open(job.result_markdown.name) as fh:
        assert fh.read().decode().lower().count("this is a lot of 12 point text") == 3  # once per page

    metrics = scrape()
    assert metrics[("ocr_jobs_submitted_total", (("engine", "cpu"),))] == 1
    assert metrics[("ocr_jobs_completed_total", (("engine", "cpu"),))] == 1
    assert ("ocr_jobs_failed_total", (("error_code", FAIL_CODE),)) not in metrics  # no job is failed now
    assert metrics[("ocr_pages_processed_total", (("engine", "cpu"), ("source", "ocr")))] == 3
    recognize_runs = StageEvent.objects.filter(job=job, stage="recognize").count()
    assert recognize_runs == 4  # 3 pages + the retried one
    assert metrics[("ocr_stage_duration_seconds_count", (("stage", "recognize"),))] == recognize_runs
    assert metrics[("ocr_stage_duration_seconds_bucket", (("le", "+Inf"), ("stage", "recognize")))] == recognize_runs
    for queue in ("cpu", "layout", "ocr"):
        assert metrics[("ocr_queue_depth", (("queue", queue),))] == 0
        assert metrics[("ocr_oldest_queued_age_seconds", (("queue", queue),))] == 0
    assert any(name == "django_http_requests_total_by_method_total" for name, _ in metrics)

    # JSON logs from the healthy worker: every pipeline line names its job, page lines their page.
    records = [json.loads(line) for line in healthy.log.read_text().splitlines() if line.startswith("{")]
    assert {"time", "level", "logger", "message", "job_id", "page_id"} <= set(records[0])
    pipeline_lines = [r for r in records if r["logger"].startswith("apps.jobs")]
    assert pipeline_lines, healthy.tail()
    assert all(r["job_id"] == str(job.pk) for r in pipeline_lines), pipeline_lines
    stage_lines = [r for r in pipeline_lines if r.get("stage") in ("layout", "recognize")]
    assert stage_lines and all(r["page_id"] == pages[1].pk for r in stage_lines)


# --- /metrics access ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_metrics_needs_token_or_loopback(settings):
    settings.METRICS_CACHE_SECONDS = 0
    settings.METRICS_TOKEN = ""
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics").status_code == 403
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 200
    settings.METRICS_TOKEN = "s3cret"
    assert Client(REMOTE_ADDR="127.0.0.1").get("/metrics").status_code == 401
    assert Client(REMOTE_ADDR="10.1.2.3").get("/metrics", HTTP_AUTHORIZATION="Bearer nope").status_code == 401
    ok = Client(REMOTE_ADDR="10.1.2.3").get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret")
    assert ok.status_code == 200 and b"ocr_queue_depth" in ok.content


# --- permissions, actions, purge ---------------------------------------------------------------


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


@pytest.mark.django_db
def test_migration_creates_the_operators_group():
    group = Group.objects.get(name="Operators")
    perms = {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.select_related("content_type")}
    assert perms == {
        "jobs.view_job",
        "jobs.view_page",
        "jobs.view_region",
        "jobs.view_stageevent",
        "jobs.retry_job",
        "jobs.cancel_job",
    }


@pytest.mark.django_db
def test_operator_may_retry_and_cancel_but_not_delete_or_purge():
    operator = make_operator()
    client = client_for(operator)
    job = stored_job(status="failed", error_code="engine:x")
    changelist = client.get(reverse("admin:jobs_job_changelist"))
    assert changelist.status_code == 200
    action_names = {value for value, _ in changelist.context["action_form"].fields["action"].choices}
    assert {"retry_jobs", "cancel_jobs"} <= action_names
    assert not action_names & {"delete_selected", "purge_jobs", "rerun_jobs"}

    page = client.get(reverse("admin:jobs_job_change", args=[job.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="ocr-act-retry"' in html and 'id="ocr-act-cancel"' in html
    assert 'id="ocr-act-purge"' not in html and "deletelink" not in html

    assert client.post(reverse("admin:jobs_job_delete", args=[job.pk]), {"post": "yes"}).status_code == 403
    assert client.post(reverse("admin:jobs_job_act", args=[job.pk, "purge"])).status_code == 403
    assert client.post(reverse("admin:jobs_job_act", args=[job.pk, "rerun"])).status_code == 403
    assert client.get(reverse("admin:jobs_job_act", args=[job.pk, "retry"])).status_code == 405
    assert Job.objects.filter(pk=job.pk, source__gt="").exists()

    # Cancel is idempotent: a second press changes nothing and records nothing.
    active = stored_job(status="running")
    for _ in range(2):
        resp = client.post(
            reverse("admin:jobs_job_changelist"), {"action": "cancel_jobs", "_selected_action": [str(active.pk)]}
        )
        assert resp.status_code == 302
    active.refresh_from_db()
    assert active.status == "cancelled"
    assert list(active.events.values_list("stage", "actor")) == [("cancel", operator.username)]


@pytest.mark.django_db
def test_superuser_purges_payload_and_results_once(admin_client, admin_user, django_capture_on_commit_callbacks):
    job = stored_job(status="done")
    names = [
        job.source.name,
        job.result_markdown.name,
        job.result_json.name,
        *job.pages.values_list("image", flat=True),
    ]
    assert all(default_storage.exists(n) for n in names)
    for _ in range(2):  # the second purge finds nothing and records nothing
        with django_capture_on_commit_callbacks(execute=True):  # files go once the rows let go
            resp = admin_client.post(reverse("admin:jobs_job_act", args=[job.pk, "purge"]))
        assert resp.status_code == 302
    job.refresh_from_db()
    assert not job.source and not job.result_markdown and not job.result_json
    assert not any(default_storage.exists(n) for n in names)
    assert not Region.objects.filter(page__job=job).exists()
    assert job.pages.count() == 2 and not job.pages.exclude(image="").exists()
    assert list(job.events.values_list("stage", "actor")) == [("purge", admin_user.username)]
    # A purged job cannot be retried or re-run: there is nothing left to run on.
    assert not services.rerun(job.pk, actor="x")


# --- job page, page view, images, dashboard ----------------------------------------------------


@pytest.mark.django_db
def test_job_page_shows_timeline_results_and_pages():
    operator = make_operator()
    job = stored_job(status="done", owner=operator)
    services.record(job.pk, "ingest", started=job.created_at, detail={"ocr_pages": 2})
    html = client_for(operator).get(reverse("admin:jobs_job_change", args=[job.pk])).content.decode()
    assert 'class="ocr-event" data-stage="ingest"' in html
    assert "<h1>Title</h1>" in html and "&lt;script&gt;" in html and "<script>x" not in html  # escaped
    assert "&quot;pages&quot;: []" in html
    assert html.count('class="ocr-thumb"') == 2
    assert reverse("admin:jobs_job_download", args=[job.pk, "markdown"]) in html

    download = client_for(operator).get(reverse("admin:jobs_job_download", args=[job.pk, "markdown"]))
    assert download.status_code == 200 and b"# Title" in b"".join(download.streaming_content)


@pytest.mark.django_db
def test_page_view_draws_one_box_per_region_and_serves_images():
    operator = make_operator()
    client = client_for(operator)
    job = stored_job(regions=5)
    page = job.pages.get(index=0)
    html = client.get(reverse("admin:jobs_job_page", args=[job.pk, 0])).content.decode()
    assert 'data-regions="5"' in html and html.count('class="ocr-box"') == 5
    assert html.count('class="ocr-region"') == 5
    assert "low-confidence" in html and "loop-cut" in html

    full = client.get(reverse("admin:jobs_job_page_image", args=[page.pk]))
    assert full.status_code == 200 and full["Content-Type"] == "image/png"
    assert Image.open(io.BytesIO(b"".join(full.streaming_content))).size == (300, 400)
    thumb = client.get(reverse("admin:jobs_job_page_image", args=[page.pk]) + "?w=100")
    assert thumb["Content-Type"] == "image/jpeg" and Image.open(io.BytesIO(thumb.content)).size[0] == 100

    # Someone without view permission gets no image, even knowing the URL.
    stranger = get_user_model().objects.create_user(username="stranger", password="x", is_staff=True)
    assert client_for(stranger).get(reverse("admin:jobs_job_page_image", args=[page.pk])).status_code == 403


@pytest.mark.django_db
def test_text_layer_page_is_rendered_from_its_pdf():
    """Text-layer pages store no image; the console renders the PDF page on the fly."""
    operator = make_operator()
    data = Path(dev_file("multi_page.pdf")).read_bytes()
    job = Job.objects.create(status="done", filename="multi_page.pdf", kind="pdf", sha256="1" * 64, page_count=5)
    job.source.save(f"{job.pk}.pdf", ContentFile(data))
    page = Page.objects.create(job=job, index=1, status="done", source="text-layer", width=1654, height=2339, dpi=200)
    resp = client_for(operator).get(reverse("admin:jobs_job_page_image", args=[page.pk]))
    assert resp.status_code == 200 and resp["Content-Type"] == "image/png"
    width, height = Image.open(io.BytesIO(resp.content)).size
    assert abs(width / height - 1654 / 2339) < 0.01 and width < 1654  # low dpi, same page


@pytest.mark.django_db
def test_changelist_filters_search_and_dashboard():
    operator = make_operator()
    client = client_for(operator)
    failed = stored_job(status="failed", error_code="engine:boom", owner=operator, duration_s=90)
    done = stored_job(status="done", duration_s=3)
    url = reverse("admin:jobs_job_changelist")

    def listed(query: str) -> set:
        resp = client.get(url + query)
        assert resp.status_code == 200, resp.content[:500]
        return {job.pk for job in resp.context["cl"].result_list}

    assert listed("") == {failed.pk, done.pk}
    assert listed("?status__exact=failed") == {failed.pk}
    assert listed("?has_error=yes") == {failed.pk}
    assert listed("?has_error=no") == {done.pk}
    assert listed("?status__exact=failed&error_code=engine:boom") == {failed.pk}  # the dashboard's links
    assert listed(f"?owner__id__exact={operator.pk}") == {failed.pk}
    assert listed("?engine__exact=cpu") == {failed.pk, done.pk}
    assert listed(f"?q={failed.pk}") == {failed.pk}
    assert listed("?q=" + "0" * 64) == {failed.pk, done.pk}
    assert listed("?q=stored") == {failed.pk, done.pk}
    assert listed("?q=nothing-like-it") == set()
    by_duration = client.get(url + "?o=7").context["cl"]  # column 7: duration (0 is the checkbox)
    assert [j.pk for j in by_duration.result_list] == [done.pk, failed.pk]
    by_duration_desc = client.get(url + "?o=-7").context["cl"]
    assert [j.pk for j in by_duration_desc.result_list] == [failed.pk, done.pk]
    html = client.get(url + "?status__exact=failed").content.decode()
    assert 'class="ocr-badge"' in html and 'class="ocr-progress"' in html

    index = client.get(reverse("admin:index")).content.decode()
    assert 'id="ocr-dashboard"' in index and 'id="ocr-queues"' in index
    assert "engine:boom" in index  # failures in the last hour by error code
    assert 'id="ocr-flower"' in index


# --- Flower in the local stack -------------------------------------------------------------------


def _procfile_command(name: str) -> str:
    for line in (Path(__file__).resolve().parent.parent / "compose" / "Procfile").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {name} line in the Procfile")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_flower_from_the_procfile_asks_for_a_login(broker_url, tmp_path):
    """The Procfile's flower line, run as honcho runs it (a shell), answers only with the
    credentials from FLOWER_BASIC_AUTH, and does not start Flower at all without them."""
    command = _procfile_command("flower")
    root = Path(__file__).resolve().parent.parent
    refused = subprocess.run(
        ["bash", "-c", f"timeout 2 bash -c {shlex.quote(command)}"],
        cwd=root,
        env={k: v for k, v in os.environ.items() if k != "FLOWER_BASIC_AUTH"},
        capture_output=True,
        text=True,
    )
    assert "not started without a login" in refused.stderr

    port = _free_port()
    env = {
        **os.environ,
        "FLOWER_BASIC_AUTH": "ops:flower-pw",
        "FLOWER_PORT": str(port),
        "CELERY_BROKER_URL": broker_url,
    }
    log = (tmp_path / "flower.log").open("w")
    proc = subprocess.Popen(["bash", "-c", command], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=2)
                raise AssertionError("Flower answered without credentials")
            except urllib.error.HTTPError as exc:
                assert exc.code == 401
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "flower.log").read_text()
                time.sleep(0.3)
        request = urllib.request.Request(
            url, headers={"Authorization": "Basic " + base64.b64encode(b"ops:flower-pw").decode()}
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert resp.status == 200 and b"Flower" in resp.read()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
