"""A small OpenAI-compatible chat-completions server for tests and benchmarks.

It stands in for vLLM at the HTTP boundary, which is all the ``vllm`` recognizer sees: it records
every request body, counts requests in flight (and the peak), notices when a client drops the
connection, and answers according to a ``behaviour`` callable — normally, with an error status
(429/503), by hanging, or by dribbling the body out slowly.

In-process (tests):  ``with OpenAIServer(behaviour) as srv: srv.url``
Separate process (benchmarks, so its CPU is not counted as the client's):
    python -m tests.support.openai_server --port 8799 --latency-ms 200
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """What to answer one request with."""

    text: str = "ok"
    finish_reason: str = "stop"
    status: int = 200
    delay_s: float = 0.0  # wait before answering (a model decoding)
    hang: bool = False  # never answer; wait for the client to give up
    dribble_s: float = 0.0  # send the body one byte at a time over this long


Behaviour = Callable[[dict[str, Any], int], Reply]


def echo_prompt(body: dict[str, Any], n: int) -> Reply:
    """Default: answer with the text prompt it was sent, so tests see which prompt went out."""
    return Reply(text=f"answer to: {prompt_of(body)}")


def prompt_of(body: dict[str, Any]) -> str:
    for part in body["messages"][-1]["content"]:
        if part.get("type") == "text":
            return part["text"]
    return ""


@dataclass
class Stats:
    requests: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    peak_in_flight: int = 0
    disconnects: int = 0
    completed: int = 0
    timeline: list[tuple[float, int]] = field(default_factory=list)  # (monotonic, in flight)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def enter(self, body: dict[str, Any]) -> int:
        with self.lock:
            self.requests.append(body)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self.timeline.append((time.monotonic(), self.in_flight))
            return len(self.requests)

    def leave(self, *, disconnected: bool) -> None:
        with self.lock:
            self.in_flight -= 1
            self.timeline.append((time.monotonic(), self.in_flight))
            if disconnected:
                self.disconnects += 1
            else:
                self.completed += 1


def _client_gone(sock: socket.socket, wait_s: float) -> bool:
    """True when the peer closed its side (readable with nothing to read)."""
    readable, _, _ = select.select([sock], [], [], wait_s)
    if not readable:
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as vLLM's server does
    server: _Server

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/health", "/v1/models"):
            self._json(200, {"object": "list", "data": [{"id": "any", "object": "model"}]})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        stats = self.server.stats
        n = stats.enter(body)
        disconnected = False
        try:
            reply = self.server.behaviour(body, n)
            if reply.hang or reply.delay_s:
                deadline = time.monotonic() + (3600 if reply.hang else reply.delay_s)
                while time.monotonic() < deadline:
                    if _client_gone(self.connection, min(0.05, max(0.0, deadline - time.monotonic()))):
                        disconnected = True
                        self.close_connection = True
                        return
            if reply.status != 200:
                self._json(reply.status, {"error": {"message": f"status {reply.status}", "code": reply.status}})
                return
            payload = {
                "id": f"cmpl-{n}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", ""),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": reply.finish_reason,
                        "message": {"role": "assistant", "content": reply.text},
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": len(reply.text.split()), "total_tokens": 10},
            }
            disconnected = not self._json(200, payload, dribble_s=reply.dribble_s)
        finally:
            stats.leave(disconnected=disconnected)

    def _json(self, status: int, payload: dict, dribble_s: float = 0.0) -> bool:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 429:
                self.send_header("Retry-After", "0")
            self.end_headers()
            if dribble_s:
                step = dribble_s / max(1, len(data))
                for i in range(len(data)):
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                    time.sleep(step)
            else:
                self.wfile.write(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
            return False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # hundreds of connections open at once
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], behaviour: Behaviour) -> None:
        super().__init__(addr, _Handler)
        self.behaviour = behaviour
        self.stats = Stats()


class OpenAIServer:
    """Serve on 127.0.0.1 (a free port) in a background thread for the ``with`` block."""

    def __init__(self, behaviour: Behaviour = echo_prompt, port: int = 0) -> None:
        self._server = _Server(("127.0.0.1", port), behaviour)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def stats(self) -> Stats:
        return self._server.stats

    @property
    def behaviour(self) -> Behaviour:
        return self._server.behaviour

    @behaviour.setter
    def behaviour(self, value: Behaviour) -> None:
        self._server.behaviour = value

    def wait_for(self, condition: Callable[[Stats], bool], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition(self.stats):
                return True
            time.sleep(0.02)
        return condition(self.stats)

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="fixed time per request")
    ns = parser.parse_args()
    delay = ns.latency_ms / 1000

    def fixed(body: dict[str, Any], n: int) -> Reply:
        return Reply(text=f"region {n}", delay_s=delay)

    server = _Server(("127.0.0.1", ns.port), fixed)
    print(f"listening on http://127.0.0.1:{ns.port}/v1", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        s = server.stats
        print(json.dumps({"requests": len(s.requests), "peak_in_flight": s.peak_in_flight}), flush=True)


if __name__ == "__main__":
    main()
