"""Object stores for tests: moto's S3-compatible server and Azurite (Azure Blob), as fixtures.

Both are the boundary that cannot run for real here. ``s3_endpoint`` yields moto's URL with the
bucket BUCKET created; ``azurite`` yields a connection string with CONTAINER created. Azurite is
installed by .ci/azurite.sh when npm is there (pinned in tests/azurite/package-lock.json); its
tests skip, saying why, only when npm is absent.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.support.documents import ROOT

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
    s3_client(endpoint).create_bucket(Bucket=BUCKET)
    yield endpoint
    server.stop()


def s3_client(endpoint: str):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )


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
