"""Every file of the hostile corpus through the REST API and the real worker process.

Each file gets its stated outcome (a 4xx with a stable code, or a job that fails with one, or a
job that completes), never a 500, a dead worker or a stuck job; after the whole corpus a real
scan still completes. The corpus and its outcomes: tests/hostile/corpus.py.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core.files.storage import default_storage
from django.test import override_settings

from apps.jobs.models import Job
from tests.hostile.corpus import CASES, CLEAN_NAMES, SECRET, Case, Done, Failed, Refused, text_png
from tests.support.documents import dev_file
from tests.support.jobs_api import upload, wait_for_job
from tests.support.perimeter import settle


@pytest.fixture
def worker(worker, redis_client, transactional_db):
    """The shared worker, left idle after each case: nothing may run while the database is flushed."""
    yield worker
    settle(redis_client)


def _post(api, data: bytes, name: str):
    fh = io.BytesIO(data)
    fh.name = name
    return api.post("/api/v1/jobs", {"file": fh}, format="multipart")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_file(case: Case, api, worker):
    try:
        data = case.make()
    except FileNotFoundError as exc:  # a shared/data/dev file on a checkout without shared/
        pytest.skip(str(exc))
    with override_settings(**case.settings):
        resp = _post(api, data, case.upload_name)
    expect = case.expect
    if isinstance(expect, Refused):
        assert (resp.status_code, resp.json()["error"]["code"]) == (expect.status, expect.code), resp.content[:400]
        assert resp.json()["error"]["message"]
        assert not Job.objects.exists(), "a refused file leaves no job"
    else:
        assert resp.status_code == 202, resp.content[:400]
        job_id = resp.json()["id"]
        body = wait_for_job(api, job_id, timeout=120)
        if isinstance(expect, Failed):
            assert body["status"] == "failed", body
            assert body["error"]["code"] == expect.code, body
        else:
            assert isinstance(expect, Done)
            assert body["status"] == "done", (body, worker.tail())
            _check_done(case, Job.objects.get(pk=job_id), api)
    assert worker.proc.poll() is None, f"the worker died on {case.name}:\n{worker.tail()}"


def _check_done(case: Case, job: Job, api) -> None:
    # The stored name is ours whatever the client called the file.
    assert job.source.name == f"sources/{job.pk}.{job.kind}"
    if case.name in CLEAN_NAMES:
        assert job.filename == CLEAN_NAMES[case.name]
    markdown = api.get(f"/api/v1/jobs/{job.pk}/result?format=markdown").content
    layout = api.get(f"/api/v1/jobs/{job.pk}/result?format=json").content
    json.loads(layout)
    if case.name == "javascript_and_attachment.pdf":
        # Rendered, not run and not unpacked: the page text is there, the attachment and script not.
        assert b"only its pixels count" in markdown
        for blob in (markdown, layout):
            assert SECRET not in blob and b"app.alert" not in blob and b"payload.txt" not in blob
        _, files = default_storage.listdir(f"pages/{job.pk}") if default_storage.exists(f"pages/{job.pk}") else ([], [])
        assert all(name.endswith(".png") for name in files)
    if case.name == "polyglot_png_pdf.png":
        assert job.kind == "png"
    if case.name == "polyglot_pdf_zip.pdf":
        assert job.kind == "pdf"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("extra", [60_000, 400_000], ids=["streamed-past-limit", "declared-past-limit"])
def test_size_limit(api, extra: int):
    """60 KB over: Content-Length is within the multipart slack, so the streaming upload handler
    is what stops it; 400 KB over: refused from Content-Length before the body is read."""
    data = text_png() + b"\0" * (100_000 + extra)
    with override_settings(OCR_MAX_UPLOAD_BYTES=100_000):
        resp = _post(api, data, "big.png")
    assert resp.status_code == 413
    assert resp.json()["error"]["code"] == "input:too-large"
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_good_document_completes_after_the_corpus(api, worker):
    resp = upload(api, dev_file("phototest.tif"))
    assert resp.status_code == 202
    body = wait_for_job(api, resp.json()["id"])
    assert body["status"] == "done", (body, worker.tail())
    text = api.get(f"/api/v1/jobs/{body['id']}/result").content.decode().lower()
    assert "quick brown dog" in text
    assert worker.proc.poll() is None
