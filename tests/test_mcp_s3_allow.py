"""The remote MCP server reads object storage only where an operator allowed it, and its errors
never say whether an object exists.

moto's S3-compatible HTTP server on 127.0.0.1 stands in for S3 (no AWS reachable here; it is the
boundary), and it counts the requests it serves, so "refused without touching storage" is
observed, not assumed.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
import requests
from moto.server import ThreadedMotoServer
from ocrclient import mcp_server
from ocrclient.mcp_server import ToolError, _remote_bytes, s3_allow_list


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def s3(monkeypatch_module) -> Iterator[str]:
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for name, value in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch_module.setenv(name, value)
    client = boto3.client("s3")
    for bucket in ("shared-inbox", "other-tenant"):
        client.create_bucket(Bucket=bucket)
    client.put_object(Bucket="shared-inbox", Key="tenant-a/doc.pdf", Body=b"%PDF-allowed")
    client.put_object(Bucket="shared-inbox", Key="tenant-b/doc.pdf", Body=b"%PDF-b")
    client.put_object(Bucket="other-tenant", Key="secret.pdf", Body=b"%PDF-secret")
    yield endpoint
    server.stop()


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def _requests_served(endpoint: str) -> int:
    # moto's request recorder: one line per S3 request served since the fixture reset it.
    return len(requests.get(f"{endpoint}/moto-api/recorder/download-recording", timeout=5).text.splitlines())


@pytest.fixture
def recording(s3) -> Iterator[str]:
    requests.post(f"{s3}/moto-api/recorder/reset-recording", timeout=5)
    requests.post(f"{s3}/moto-api/recorder/start-recording", timeout=5)
    yield s3
    requests.post(f"{s3}/moto-api/recorder/stop-recording", timeout=5)
    Path("moto_recording").unlink(missing_ok=True)  # the recorder's file, in the working directory


ALLOWED = s3_allow_list("s3://shared-inbox/tenant-a/")


def test_by_default_no_uri_is_read(recording, monkeypatch):
    monkeypatch.delenv(mcp_server.S3_ALLOW_ENV, raising=False)
    assert s3_allow_list() == ()
    with pytest.raises(ToolError) as refused:
        _remote_bytes(None, None, "s3://shared-inbox/tenant-a/doc.pdf", s3_allow_list())
    assert "cannot be read" in str(refused.value)
    assert _requests_served(recording) == 0


@pytest.mark.parametrize(
    "uri",
    [
        "s3://other-tenant/secret.pdf",  # exists, another bucket
        "s3://other-tenant/nothing.pdf",  # missing, another bucket
        "s3://shared-inbox/tenant-b/doc.pdf",  # exists, another prefix
        "s3://shared-inbox/tenant-a/../tenant-b/doc.pdf",  # dot segments some servers normalise
        "s3://shared-inbox/tenant-a",  # the prefix itself without its slash
    ],
)
def test_a_uri_outside_the_allow_list_is_refused_without_touching_storage(recording, uri):
    with pytest.raises(ToolError) as refused:
        _remote_bytes(None, None, uri, ALLOWED)
    assert str(refused.value) == mcp_server._UNREADABLE
    assert _requests_served(recording) == 0


def test_inside_the_allow_list_missing_and_present_objects_differ_only_in_success(recording):
    assert _remote_bytes(None, None, "s3://shared-inbox/tenant-a/doc.pdf", ALLOWED) == ("doc.pdf", b"%PDF-allowed")
    assert _requests_served(recording) >= 1
    with pytest.raises(ToolError) as missing:
        _remote_bytes(None, None, "s3://shared-inbox/tenant-a/missing.pdf", ALLOWED)
    # The same words as a refusal: no NoSuchKey, no AccessDenied, no bucket names from botocore.
    assert str(missing.value) == mcp_server._UNREADABLE


def test_a_malformed_allow_list_fails_loudly():
    with pytest.raises(ValueError):
        s3_allow_list("shared-inbox/tenant-a")
