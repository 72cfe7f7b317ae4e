"""The S3 path: web and worker keep every byte in an S3-compatible bucket, none on local disk.

moto's S3-compatible HTTP server runs on 127.0.0.1 (no AWS reachable here; it is the boundary
that cannot run for real). The web side (this process) switches storage with
``override_settings(STORAGES=...)``; a worker process is started with OCR_STORAGE=s3 and the
AWS_* variables, and the suite's local-storage workers are paused meanwhile so that only it
takes the job.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from celery import current_app
from django.conf import settings
from django.test import override_settings as settings_override
from moto.server import ThreadedMotoServer

from tests.support.documents import dev_file
from tests.support.jobs_api import upload, wait_for_job
from tests.support.queues import Broker

BUCKET = "ocr-test"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "test-key", "AWS_SECRET_ACCESS_KEY": "test-secret"}
REGION = "us-east-1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    _client(endpoint).create_bucket(Bucket=BUCKET)
    yield endpoint
    server.stop()


def _client(endpoint: str):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


def _files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()} if root.exists() else set()


@pytest.mark.django_db(transaction=True)
def test_job_through_s3_storage(api, start_worker, worker, redis_client, s3_endpoint):
    env = {
        "OCR_STORAGE": "s3",
        "AWS_STORAGE_BUCKET_NAME": BUCKET,
        "AWS_S3_ENDPOINT_URL": s3_endpoint,
        "AWS_S3_REGION_NAME": REGION,
        **CREDENTIALS,
    }
    web_storage = {
        **settings.STORAGES,
        "default": {
            "BACKEND": "storages.backends.s3.S3Storage",
            "OPTIONS": {
                "bucket_name": BUCKET,
                "endpoint_url": s3_endpoint,
                "region_name": REGION,
                "access_key": CREDENTIALS["AWS_ACCESS_KEY_ID"],
                "secret_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                "default_acl": None,
                "file_overwrite": True,
            },
        },
    }
    broker = Broker(current_app, redis_client)
    broker.wait_idle()
    s3_worker = start_worker(name="s3", env=env)
    local_before = _files_under(Path(settings.MEDIA_ROOT))
    try:
        keep = tuple(n for n in broker.consumers() if n.startswith("s3@"))
        assert keep, "the S3 worker does not answer remote control"
        with broker.paused(keep=keep), settings_override(STORAGES=web_storage):
            resp = upload(api, dev_file("phototest.tif"))
            assert resp.status_code == 202, resp.content
            job_id = resp.json()["id"]
            done = wait_for_job(api, job_id)
            assert done["status"] == "done", (done, s3_worker.tail())
            markdown = api.get(f"/api/v1/jobs/{job_id}/result?format=markdown").content.decode()
            assert "lazy fox" in markdown.lower()
            assert api.get(f"/api/v1/jobs/{job_id}/result?format=json").json()["pages"][0]["regions"]
            # The suite's workers must not see the rest of the suite's jobs with S3 settings.
            s3_worker.stop()
    finally:
        s3_worker.stop()

    keys = {o["Key"] for o in _client(s3_endpoint).list_objects_v2(Bucket=BUCKET).get("Contents", [])}
    assert f"sources/{job_id}.tiff" in keys, keys
    assert f"pages/{job_id}/00000.png" in keys, keys
    assert {f"results/{job_id}.md", f"results/{job_id}.json"} <= keys, keys
    assert _files_under(Path(settings.MEDIA_ROOT)) == local_before, "bytes went to local disk"
