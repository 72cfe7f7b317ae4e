"""Operators' console without a browser: permissions, actions, purge, the job page, the page view
with its images, the changelist's filters and the dashboard.

The browser walk-through is tests/test_console_browser.py; an operator's retry through real
workers is tests/test_retry.py."""

from __future__ import annotations

import io
import threading

import pymupdf
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection
from django.urls import reverse
from PIL import Image

from apps.jobs import services
from apps.jobs.admin import ACTIONS
from apps.jobs.models import Job, Page, Region, StageEvent
from tests.hostile.corpus import pdf_image_bomb
from tests.support.console import client_for, make_operator, stored_job


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
def test_the_console_never_draws_a_tenants_document(monkeypatch):
    """Text-layer pages store no image, and the console no longer renders their PDF page in the
    web process: the issue's born-digital page that also drew a JPEG scan bomb killed a gunicorn
    worker each time an operator opened its job. The page view shows its regions alone."""
    operator = make_operator()
    job = Job.objects.create(status="done", filename="bomb.pdf", kind="pdf", sha256="1" * 64, page_count=1)
    job.source.save(f"{job.pk}.pdf", ContentFile(pdf_image_bomb(side=6000)))
    page = Page.objects.create(job=job, index=0, status="done", source="text-layer", width=1654, height=2339, dpi=200)
    opened: list[object] = []
    real_open = pymupdf.open
    monkeypatch.setattr(pymupdf, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    client = client_for(operator)
    for params in ("", "?w=200"):
        resp = client.get(reverse("admin:jobs_job_page_image", args=[page.pk]) + params)
        assert resp.status_code == 404
    view = client.get(reverse("admin:jobs_job_page", args=[job.pk, 0]))
    assert view.status_code == 200 and b"ocr-page-image" not in view.content
    assert b"regions only" in view.content
    assert client.get(reverse("admin:jobs_job_change", args=[job.pk])).status_code == 200
    assert opened == [], "the web process opened the tenant's PDF"


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


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_every_action_wins_once_and_is_on_the_timeline_with_its_actor(name):
    """The admin-action recipe's service step, checked for every ``JobAction`` in ``ACTIONS``
    (one added later included): two operators act on one job at once and one wins (a row lock
    or a conditional UPDATE), the win is on the job's timeline with that operator's name, and
    acting again on what it left changes nothing."""
    action = ACTIONS[name]
    job = stored_job(status=action.statuses[0], error_code="engine:x")
    job.pages.filter(index=0).update(status=Page.Status.FAILED)
    barrier = threading.Barrier(2)
    won: dict[str, bool] = {}

    def act(actor: str) -> None:
        try:
            barrier.wait(timeout=10)
            won[actor] = action.service(job.pk, actor=actor)
        finally:
            connection.close()  # this thread's own connection

    threads = [threading.Thread(target=act, args=(f"operator-{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(won.values()) == [False, True], won
    [winner] = [actor for actor, ok in won.items() if ok]
    events = list(StageEvent.objects.filter(job_id=job.pk, stage=name).values_list("actor", flat=True))
    assert events == [winner]
    assert action.service(job.pk, actor="late") is False
    assert StageEvent.objects.filter(job_id=job.pk, stage=name).count() == 1
