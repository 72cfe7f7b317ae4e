"""The Azure Blob path (OCR_STORAGE=azure) through django-storages, against Azurite.

Azurite is Microsoft's Azure Storage emulator (npm ``azurite``, pinned in
tests/azurite/package-lock.json). The fixture installs it with .ci/azurite.sh when npm is there
and it is not yet installed, starts ``azurite-blob`` on a free port with its data in a temporary
folder, and stops it afterwards; the tests skip, saying why, only when npm is absent.

One job goes the whole way: upload (web side, this process, storage switched with
``override_settings``), pipeline (a worker process started with OCR_STORAGE=azure and
AZURE_CONNECTION_STRING; the suite's local-storage workers are paused), result download, the
admin's page image streamed from the container, then the retention purge deleting the blobs.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from celery import current_app
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.test import override_settings as settings_override
from django.urls import reverse
from django.utils import timezone

from apps.jobs import services
from apps.jobs.models import Job, Page
from tests.support.documents import ROOT, dev_file
from tests.support.jobs_api import upload, wait_for_job
from tests.support.queues import Broker

AZURITE = ROOT / "tests" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
CONTAINER = "ocr-test"
# Azurite's documented development account (public, the same in every Azurite).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _installed() -> Path:
    if not AZURITE.exists():
        if shutil.which("npm") is None:
            pytest.skip("npm is absent, so Azurite (the Azure Storage emulator) cannot be installed")
        subprocess.run(["bash", str(ROOT / ".ci" / "azurite.sh")], check=True, timeout=600)
    return AZURITE


@pytest.fixture(scope="module")
def azurite() -> Iterator[str]:
    """A running azurite-blob; yields its connection string, with the test container created."""
    binary = _installed()
    port = _free_port()
    data = tempfile.mkdtemp(prefix="azurite-")
    log = (Path(data) / "azurite.log").open("w")
    proc = subprocess.Popen(
        [str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", data, "--skipApiVersionCheck"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"azurite did not start:\n{(Path(data) / 'azurite.log').read_text()}") from None
                time.sleep(0.2)
        conn = (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/{ACCOUNT};"
        )
        from azure.storage.blob import BlobServiceClient

        BlobServiceClient.from_connection_string(conn).create_container(CONTAINER)
        yield conn
    finally:
        proc.send_signal(signal.SIGINT)  # azurite closes on Ctrl-C; SIGTERM leaves it waiting
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(data, ignore_errors=True)


def _blobs(conn: str) -> set[str]:
    from azure.storage.blob import BlobServiceClient

    return {b.name for b in BlobServiceClient.from_connection_string(conn).get_container_client(CONTAINER).list_blobs()}


def _files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()} if root.exists() else set()


@pytest.mark.django_db(transaction=True)
def test_job_through_azure_blob_storage(api, user, start_worker, worker, redis_client, azurite):
    web_storage = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.azure_storage.AzureStorage",
            "OPTIONS": {"connection_string": azurite, "azure_container": CONTAINER, "overwrite_files": True},
        },
    }
    env = {"OCR_STORAGE": "azure", "AZURE_CONNECTION_STRING": azurite, "AZURE_CONTAINER": CONTAINER}
    broker = Broker(current_app, redis_client)
    broker.wait_idle()
    azure_worker = start_worker(name="azure", env=env)
    local_before = _files_under(Path(settings.MEDIA_ROOT))
    try:
        keep = tuple(n for n in broker.consumers() if n.startswith("azure@"))
        assert keep, "the Azure worker does not answer remote control"
        with broker.paused(keep=keep), settings_override(STORAGES=web_storage):
            resp = upload(api, dev_file("phototest.tif"))
            assert resp.status_code == 202, resp.content
            job_id = resp.json()["id"]
            done = wait_for_job(api, job_id)
            assert done["status"] == "done", (done, azure_worker.tail())
            # The suite's workers must not see the rest of the suite's jobs with Azure settings.
            azure_worker.stop()

            markdown = api.get(f"/api/v1/jobs/{job_id}/result?format=markdown").content.decode()
            assert "lazy fox" in markdown.lower()
            assert api.get(f"/api/v1/jobs/{job_id}/result?format=json").json()["pages"][0]["regions"]
            assert "lazy fox" in api.get(f"/status/{job_id}").json()["result"]["markdown"].lower()

            blobs = _blobs(azurite)
            expected = {f"sources/{job_id}.tiff", f"pages/{job_id}/00000.png", f"results/{job_id}.md"}
            assert expected | {f"results/{job_id}.json"} <= blobs, blobs

            # The console streams the page image from the container (private: through Django).
            admin = Client()
            admin.force_login(get_user_model().objects.create_superuser("azure-admin", password="x"))
            page = Page.objects.get(job_id=job_id)
            image = admin.get(reverse("admin:jobs_job_page_image", args=[page.pk]))
            assert image.status_code == 200 and image["Content-Type"] == "image/png"
            body = b"".join(image.streaming_content) if image.streaming else image.content
            assert body.startswith(b"\x89PNG") and len(body) > 1000

            # Retention: the job is aged past OCR_RETENTION_DAYS and purged; its blobs go.
            Job.objects.filter(pk=job_id).update(
                created_at=timezone.now() - timedelta(days=settings.OCR_RETENTION_DAYS + 1)
            )
            purged = services.purge_expired(days=settings.OCR_RETENTION_DAYS, batch=10)
            assert purged.jobs >= 1
            assert not {n for n in _blobs(azurite) if job_id in n}, _blobs(azurite)
            assert api.get(f"/api/v1/jobs/{job_id}/result").status_code == 410
            assert api.get(f"/status/{job_id}").status_code == 410
    finally:
        azure_worker.stop()
    assert _files_under(Path(settings.MEDIA_ROOT)) == local_before, "bytes went to local disk"
