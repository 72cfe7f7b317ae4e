"""Both MCP servers driven by the SDK's own client against the real stack: the stdio server as a
subprocess with a workspace, the Streamable HTTP server under uvicorn, each talking to the live
web server and a real worker."""

from __future__ import annotations

import asyncio
import base64
import shutil
import socket
import sys
import threading
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import httpx
import httpx2
import pytest
import uvicorn
from celery import current_app
from django.db import connections
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from ocrclient.mcp_server import BEGIN, END, NOTICE, http_app

from apps.jobs.models import Job
from tests.support.documents import dev_file
from tests.support.queues import Broker

TOOLS = {"submit_document", "get_document_result", "parse_document", "cancel_document", "start_batch", "get_batch"}


def _text(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


def _job_id(text: str) -> str:
    return text.split(" as job ", 1)[1].split(" ", 1)[0]


async def _poll_result(session: ClientSession, handle: str, timeout: float = 180, **args) -> str:
    job_id = handle.split("+")[0]  # a handle may carry "+layout"; replies name the platform's job id
    deadline = time.monotonic() + timeout
    while True:
        text = _text(await session.call_tool("get_document_result", {"job_id": handle, **args}))
        if text.startswith((f"Job {job_id} done", f"Job {job_id} is failed", f"Job {job_id} is cancelled")):
            return text
        assert time.monotonic() < deadline, text
        await asyncio.sleep(0.5)


@asynccontextmanager
async def _stdio(live_api, workspace: Path):
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ocrclient.mcp_server", "stdio", "--workspace", str(workspace)],
        env={k: v for k, v in live_api.env().items() if k.startswith(("OCR_", "PATH", "PYTHON", "HOME"))},
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "repo"
    (ws / "docs").mkdir(parents=True)
    for name in ("phototest.tif", "multi_page.pdf", "scanned_ocr_test.pdf"):
        shutil.copy(dev_file(name), ws / "docs" / name)
    (tmp_path / "secret.pdf").write_bytes(dev_file("multi_page.pdf").read_bytes())
    (ws / "docs" / "escape.pdf").symlink_to(tmp_path / "secret.pdf")
    return ws


def _run_closing_connections(coro) -> None:
    """asyncio.run, closing the database connections the ORM opened inside the loop (Django keys
    connections by async context, so they are not the test thread's and would outlive the test)."""

    async def wrapped() -> None:
        try:
            await coro
        finally:
            connections.close_all()

    asyncio.run(wrapped())


@pytest.fixture(autouse=True)
def _orm_in_tests_event_loop(monkeypatch) -> None:
    # The assertions read the database between awaits, in the test's own loop (not the servers').
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def test_stdio_server_tools_results_refusals_and_framing(live_api, workspace, redis_client):
    async def run() -> None:
        async with _stdio(live_api, workspace) as session:
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == TOOLS
            schema = tools["parse_document"].input_schema
            assert schema["required"] == ["file_path"]
            assert {"include_layout", "max_inline_tokens"} <= set(schema["properties"])
            assert "workspace" in schema["properties"]["file_path"]["description"]
            assert "Not for" in tools["parse_document"].description

            # submit → poll → result through the real worker, framed as untrusted data.
            submitted = _text(await session.call_tool("submit_document", {"file_path": "docs/phototest.tif"}))
            job_id = _job_id(submitted)
            result = await _poll_result(session, job_id)
            assert BEGIN in result and NOTICE in result and END in result
            assert "lazy fox" in result.lower()
            assert result.index(BEGIN) < result.lower().index("lazy fox") < result.index(END)

            # parse_document blocks (within its ceiling) and reports progress while it waits.
            progress: list[tuple[float, float | None]] = []

            async def on_progress(done, total, message) -> None:
                progress.append((done, total))

            large = await session.call_tool(
                "parse_document",
                {"file_path": "docs/multi_page.pdf", "include_layout": True, "max_inline_tokens": 50},
                progress_callback=on_progress,
            )
            text = _text(large)
            assert not large.is_error, text
            assert progress, "progress notifications while waiting"
            assert "Pages: 5" in text and ".ocr/multi_page-" in text and BEGIN in text
            written = sorted(p.relative_to(workspace).as_posix() for p in (workspace / ".ocr").iterdir())
            assert len(written) == 2 and written[0].endswith(".json") and written[1].endswith(".md")
            assert len((workspace / written[1]).read_text()) > 200
            assert sorted(p.name for p in workspace.iterdir()) == [".ocr", "docs"], "writes only under .ocr/"

            # Paths out of the workspace are refused with a clear message, and nothing is submitted.
            before = Job.objects.filter(tenant=live_api.tenant).count()
            for path in ("../../etc/passwd", "/etc/passwd", str(workspace.parent / "secret.pdf"), "docs/escape.pdf"):
                refused = await session.call_tool("submit_document", {"file_path": path})
                assert refused.is_error and "outside the workspace" in _text(refused), (path, _text(refused))
            assert "symlink" in _text(await session.call_tool("parse_document", {"file_path": "docs/escape.pdf"}))
            assert Job.objects.filter(tenant=live_api.tenant).count() == before

            # cancel stops a job that has not finished.
            broker = Broker(current_app, redis_client)
            with broker.paused("layout"):
                job_id = _job_id(
                    _text(await session.call_tool("submit_document", {"file_path": "docs/scanned_ocr_test.pdf"}))
                )
                cancelled = _text(await session.call_tool("cancel_document", {"job_id": job_id}))
                assert "cancelled" in cancelled
            assert Job.objects.get(pk=job_id).status == "cancelled"
            status = _text(await session.call_tool("get_document_result", {"job_id": job_id}))
            assert "is cancelled" in status

    _run_closing_connections(run())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def _serving(platform_url: str):
    """One replica of the Streamable HTTP server under uvicorn; yields its /mcp URL."""
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(http_app(platform_url), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def mcp_http(live_api):
    with _serving(live_api.url) as url:
        yield url


@asynccontextmanager
async def _http_session(url: str, key: str):
    http = httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=60)
    async with streamable_http_client(url, http_client=http) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def test_streamable_http_server_behind_api_keys(live_api, mcp_http):
    refused = httpx.post(mcp_http, json={"jsonrpc": "2.0", "id": 1, "method": "initialize"})
    assert refused.status_code == 401

    async def run() -> None:
        http = httpx2.AsyncClient(headers={"X-API-Key": live_api.key}, timeout=60)
        async with (
            streamable_http_client(mcp_http, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == TOOLS
            assert "file_path" not in tools["submit_document"].input_schema["properties"]
            assert {"document_base64", "uri"} <= set(tools["submit_document"].input_schema["properties"])

            data = base64.b64encode(dev_file("phototest.tif").read_bytes()).decode()
            submitted = await session.call_tool("submit_document", {"document_base64": data, "filename": "scan.tif"})
            job_id = _job_id(_text(submitted))
            assert Job.objects.get(pk=job_id).tenant == live_api.tenant, "the caller's key, the caller's tenant"
            result = await _poll_result(session, job_id)
            assert BEGIN in result and NOTICE in result and "lazy fox" in result.lower()

            local = await session.call_tool("submit_document", {"uri": "/etc/passwd"})
            assert local.is_error and "local paths are not accepted" in _text(local)
            bad = await session.call_tool("submit_document", {"document_base64": "***", "filename": "x.png"})
            assert bad.is_error and "base64" in _text(bad)

    _run_closing_connections(run())


def test_streamable_http_forwards_a_bad_key_as_the_platforms_refusal(live_api, mcp_http):
    async def run() -> str:
        http = httpx2.AsyncClient(headers={"X-API-Key": "nope.nope"}, timeout=60)
        async with (
            streamable_http_client(mcp_http, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("get_document_result", {"job_id": "00000000-0000-0000-0000-000000000000"})
            assert result.is_error
            return _text(result)

    assert "auth:invalid-credentials" in asyncio.run(run())


def test_any_http_replica_answers_a_job_another_one_took(live_api, mcp_http):
    """The server keeps nothing between calls: a job submitted through one replica with
    include_layout is collected, layout and all, through another that never saw the submit."""
    data = base64.b64encode(dev_file("phototest.tif").read_bytes()).decode()

    async def run() -> None:
        async with _http_session(mcp_http, live_api.key) as first:
            submitted = _text(
                await first.call_tool(
                    "submit_document", {"document_base64": data, "filename": "scan.tif", "include_layout": True}
                )
            )
        handle = _job_id(submitted)
        with _serving(live_api.url) as other_url:
            async with _http_session(other_url, live_api.key) as other:
                result = await _poll_result(other, handle)
                refused = await other.call_tool("get_document_result", {"job_id": handle + "x"})
        assert result.startswith(f"Job {handle.split('+')[0]} done"), result
        assert "## Layout (regions in reading order)" in result and "lazy fox" in result.lower()
        assert refused.is_error and "not a job id this server returned" in _text(refused)

    _run_closing_connections(run())
