"""Flower in the local stack: the Procfile's line asks for a login, and does not start without one."""

from __future__ import annotations

import base64
import os
import shlex
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path


def _procfile_command(name: str) -> str:
    for line in (Path(__file__).resolve().parent.parent / "compose" / "Procfile").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {name} line in the Procfile")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_flower_from_the_procfile_asks_for_a_login(broker_url, tmp_path):
    """The Procfile's flower line, run as honcho runs it (a shell), answers only with the
    credentials from FLOWER_BASIC_AUTH, and does not start Flower at all without them."""
    command = _procfile_command("flower")
    root = Path(__file__).resolve().parent.parent
    refused = subprocess.run(
        ["bash", "-c", f"timeout 2 bash -c {shlex.quote(command)}"],
        cwd=root,
        env={k: v for k, v in os.environ.items() if k != "FLOWER_BASIC_AUTH"},
        capture_output=True,
        text=True,
    )
    assert "not started without a login" in refused.stderr

    port = _free_port()
    env = {
        **os.environ,
        "FLOWER_BASIC_AUTH": "ops:flower-pw",
        "FLOWER_PORT": str(port),
        "CELERY_BROKER_URL": broker_url,
    }
    log = (tmp_path / "flower.log").open("w")
    proc = subprocess.Popen(["bash", "-c", command], cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=2)
                raise AssertionError("Flower answered without credentials")
            except urllib.error.HTTPError as exc:
                assert exc.code == 401
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline and proc.poll() is None, (tmp_path / "flower.log").read_text()
                time.sleep(0.3)
        request = urllib.request.Request(
            url, headers={"Authorization": "Basic " + base64.b64encode(b"ops:flower-pw").decode()}
        )
        with urllib.request.urlopen(request, timeout=5) as resp:
            assert resp.status == 200 and b"Flower" in resp.read()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
