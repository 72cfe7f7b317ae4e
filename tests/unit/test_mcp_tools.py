"""The MCP servers' four tools as agents see them (names, schemas, descriptions), and the handle
that lets the HTTP server keep nothing between calls. Both servers driven end to end against the
real stack: tests/test_mcp.py."""

from __future__ import annotations

import asyncio

import pytest
from mcp.server.mcpserver.exceptions import ToolError
from ocrclient.mcp_server import LAYOUT_MARK, REMOTE_SOURCE, local_server, parse_handle, remote_server

TOOLS = {"submit_document", "get_document_result", "parse_document", "cancel_document", "start_batch", "get_batch"}


def _tools(server) -> dict:
    return {t.name: t for t in asyncio.run(server.list_tools())}


def test_both_servers_publish_the_same_tools_each_with_its_own_document_parameters(tmp_path):
    local, remote = _tools(local_server(tmp_path)), _tools(remote_server("http://platform.invalid"))
    assert set(local) == set(remote) == TOOLS
    for name in ("get_document_result", "cancel_document"):
        assert local[name].input_schema == remote[name].input_schema
        assert local[name].input_schema["required"] == ["job_id"]
    for name in ("submit_document", "parse_document"):
        mine, theirs = local[name].input_schema, remote[name].input_schema
        assert mine["required"] == ["file_path"] and "workspace" in mine["properties"]["file_path"]["description"]
        assert "required" not in theirs and {"document_base64", "filename", "uri"} <= set(theirs["properties"])
        assert "file_path" not in theirs["properties"]
        assert "include_layout" in mine["properties"] and "include_layout" in theirs["properties"]
        assert REMOTE_SOURCE in remote[name].description and REMOTE_SOURCE not in local[name].description
    assert "max_inline_tokens" in local["parse_document"].input_schema["properties"]
    assert "ctx" not in local["parse_document"].input_schema["properties"]
    # Batches name objects already in the platform's storage: the same parameters on both.
    for name in ("start_batch", "get_batch"):
        assert local[name].input_schema == remote[name].input_schema


def test_a_handle_carries_the_layout_choice_and_nothing_else():
    job_id = "0b7e6c1e-9d1c-4a55-9a57-0d8c9f1e2a3b"
    assert parse_handle(job_id) == (job_id, False)
    assert parse_handle(job_id + LAYOUT_MARK) == (job_id, True)
    for bad in (job_id + "+", job_id + "+layoutx", job_id + "+other"):
        with pytest.raises(ToolError, match="not a job id this server returned"):
            parse_handle(bad)
