"""Refusals at the door: each with its status and stable error code, and nothing left behind:
no Job row, no stored file, no message published to the broker, no queue grown.

"Nothing published" is watched with Celery's own ``before_task_publish`` signal in this (the web)
process, next to the real Redis queue lengths.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pymupdf
import pytest
from celery.signals import before_task_publish
from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler
from PIL import Image

from apps.jobs.models import Job
from tests.support.documents import dev_file
from tests.support.jobs_api import upload, wait_for_job
from tests.support.queues import QUEUES, UNACKED_KEY

ELEVEN_MB = 11 * 1024 * 1024


@contextmanager
def nothing_queued(redis_client) -> Iterator[None]:
    published: list[str] = []

    def on_publish(sender=None, **kwargs) -> None:
        published.append(sender)

    before_task_publish.connect(on_publish, weak=False)
    lengths = _settled_lengths(redis_client)
    jobs = Job.objects.count()
    stored = _stored_files()
    try:
        yield
    finally:
        before_task_publish.disconnect(on_publish)
    assert published == [], f"refused upload published {published}"
    assert {q: redis_client.llen(q) for q in QUEUES} == lengths
    assert Job.objects.count() == jobs, "a refused upload left a Job row"
    assert _stored_files() == stored, "a refused upload left a file in storage"


def _settled_lengths(redis_client, timeout: float = 60) -> dict[str, int]:
    """Queue lengths once no worker is moving them (an earlier test's job may still be running):
    the same for half a second, with nothing held unacknowledged."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        now = ({q: redis_client.llen(q) for q in QUEUES}, redis_client.hlen(UNACKED_KEY))
        if now == last and not now[1]:
            return now[0]
        last = now
        time.sleep(0.5)
    raise AssertionError(f"the queues did not settle: {last}")


def _stored_files() -> set[Path]:
    """Uploaded sources: the only files the web side writes (workers write pages/ and results/)."""
    root = Path(settings.MEDIA_ROOT) / "sources"
    return {p for p in root.rglob("*") if p.is_file()} if root.exists() else set()


def _refused(resp, status: int, code: str) -> None:
    assert resp.status_code == status, (resp.status_code, resp.content[:300])
    body = resp.json()
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]


def _pdf(pages: int) -> bytes:
    doc = pymupdf.open()
    for i in range(pages):
        doc.new_page().insert_text((72, 72), f"page {i + 1} of a document with too many pages")
    data = doc.tobytes()
    doc.close()
    return data


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("name", "status", "code"),
    [
        ("bad_empty.pdf", 422, "input:empty"),
        ("bad_password-example.pdf", 422, "input:encrypted"),
    ],
)
def test_bad_dev_documents_are_refused(api, redis_client, name, status, code):
    with nothing_queued(redis_client):
        _refused(upload(api, dev_file(name)), status, code)


@pytest.mark.django_db(transaction=True)
def test_text_file_is_unsupported_whatever_its_name(api, redis_client):
    with nothing_queued(redis_client):
        _refused(upload(api, "notes.txt", data=b"just some words\n" * 100), 415, "input:unsupported-type")
        _refused(upload(api, "notes.pdf", data=b"just some words\n" * 100), 415, "input:unsupported-type")


@pytest.mark.django_db(transaction=True)
def test_eleven_megabytes_refused_by_declared_length(api, redis_client):
    assert settings.OCR_MAX_UPLOAD_BYTES == 10 * 1024 * 1024, "the default limit is 10 MB"
    with nothing_queued(redis_client):
        _refused(upload(api, "big.pdf", data=b"%PDF-1.7\n" + bytes(ELEVEN_MB)), 413, "input:too-large")


class CountingHandler(FileUploadHandler):
    """Placed after the limit handler: sees only the bytes the limit handler let through."""

    seen = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        CountingHandler.seen += len(raw_data)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


@pytest.mark.django_db(transaction=True)
def test_oversized_body_stopped_while_streaming(api, redis_client, settings):
    """A body whose declared length passes the header check (the limit sits just under it, within
    the multipart slack) is stopped by the upload handler as the bytes arrive, not after."""
    settings.OCR_MAX_UPLOAD_BYTES = ELEVEN_MB - 16 * 1024
    settings.FILE_UPLOAD_HANDLERS = [
        settings.FILE_UPLOAD_HANDLERS[0],
        f"{__name__}.CountingHandler",
        *settings.FILE_UPLOAD_HANDLERS[1:],
    ]
    CountingHandler.seen = 0
    with nothing_queued(redis_client):
        _refused(upload(api, "big.pdf", data=b"%PDF-1.7\n" + bytes(ELEVEN_MB)), 413, "input:too-large")
    assert 0 < CountingHandler.seen <= settings.OCR_MAX_UPLOAD_BYTES, CountingHandler.seen


@pytest.mark.django_db(transaction=True)
def test_pdf_over_the_page_limit(api, redis_client, settings):
    settings.OCR_MAX_PAGES = 3
    with nothing_queued(redis_client):
        _refused(upload(api, "long.pdf", data=_pdf(4)), 422, "input:too-many-pages")
    # At the limit it is accepted.
    resp = upload(api, "ok.pdf", data=_pdf(3))
    assert resp.status_code == 202 and Job.objects.get(pk=resp.json()["id"]).page_count == 3


@pytest.mark.django_db(transaction=True)
def test_png_bytes_named_pdf_are_a_png(api, worker):
    """The type comes from the bytes: a PNG named .pdf is accepted as a PNG and read."""
    buf = io.BytesIO()
    Image.open(dev_file("phototest.tif")).save(buf, format="PNG")
    resp = upload(api, "scan.pdf", data=buf.getvalue())
    assert resp.status_code == 202, resp.content
    assert resp.json()["kind"] == "png"
    done = wait_for_job(api, resp.json()["id"])
    assert done["status"] == "done", done
    assert "lazy fox" in api.get(f"/api/v1/jobs/{done['id']}/result").content.decode().lower()
