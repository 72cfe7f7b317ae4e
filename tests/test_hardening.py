"""The smaller doors of issue 25: the console renders document text inert under a CSP, /readyz
tells strangers nothing but ok/error, Swagger UI comes from our own static files, and passwords
are validated."""

from __future__ import annotations

import re

import pytest
from celery import current_app
from django.contrib.auth import password_validation
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.urls import reverse

from apps.jobs.models import Job

HOSTILE_MARKDOWN = (
    b"# Invoice\n\n"
    b"![pixel](https://tracker.example/p.png?who=operator)\n\n"
    b"[click me](https://phish.example/login) and <https://auto.example/x>\n\n"
    b'<img src="https://raw.example/i.png"> <script>alert(1)</script>\n'
)


@pytest.fixture
def done_job(db) -> Job:
    job = Job.objects.create(tenant="t", status="done", filename="i.pdf", kind="pdf", sha256="0" * 64, page_count=1)
    job.result_markdown.save(f"{job.pk}.md", ContentFile(HOSTILE_MARKDOWN), save=True)
    job.result_json.save(f"{job.pk}.json", ContentFile(b'{"pages": []}'), save=True)
    return job


def test_document_text_renders_inert_in_the_console_under_a_csp(admin_client, done_job):
    resp = admin_client.get(reverse("admin:jobs_job_change", args=[done_job.pk]))
    assert resp.status_code == 200
    page = resp.content.decode()
    section = page[page.index('id="ocr-markdown"') :]
    section = section[: section.index("</fieldset>")]
    assert "<h1>Invoice</h1>" in section  # Markdown still renders...
    # ...but nothing in it makes the browser fetch or navigate anywhere.
    assert not re.search(r"<(img|a|script)\b", section), section
    assert "tracker.example" in section and "phish.example" in section  # shown as text
    policy = resp["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["img-src"] == "'self' data:"
    assert directives["script-src"] == "'self'"
    assert directives["default-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"


@pytest.mark.django_db
def test_readyz_tells_a_stranger_only_ok_or_error(client, monkeypatch):
    closed = "redis://127.0.0.1:1/0"
    monkeypatch.setitem(current_app.conf, "broker_url", closed)
    monkeypatch.setitem(current_app.conf, "broker_write_url", closed)
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json() == {"status": "unavailable", "checks": {"database": "ok", "broker": "error", "storage": "ok"}}
    assert b"127.0.0.1" not in ready.content and b"Error" not in ready.content


def test_swagger_ui_is_served_from_our_static_files(api):
    page = api.get("/api/docs/").content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert any("drf_spectacular_sidecar/swagger-ui-dist" in s for s in sources), sources
    assert not any(s.startswith(("http:", "https:", "//")) for s in sources), sources
    assert "<script>" not in page  # its settings come as a script file, allowed by the CSP
    script = next(s for s in sources if "script" in s and "sidecar" not in s)
    assert api.get(script.replace("&amp;", "&"))["Content-Type"].startswith("application/javascript")


@pytest.mark.parametrize("password", ["password123", "12345678901234", "short-1A"])
def test_weak_passwords_are_refused(password):
    with pytest.raises(ValidationError):
        password_validation.validate_password(password)
    password_validation.validate_password("correct horse battery staple 7")
