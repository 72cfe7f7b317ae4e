"""P4: ingest. 1 MB PDF uploads from 64 concurrent clients for 30 s against ``POST /api/v1/jobs``
(→ 202, a Job row and an ingest message in Redis; no worker runs), next to the minimal Starlette
+ redis-py endpoint of bench/ingest_ref.py doing the least of the same work (store the file,
push an id) under uvicorn.

Load comes from ``wrk`` (C, one thread per core; its Lua script sends the prebuilt multipart
body and counts statuses), because a Python load generator would take more of the two cores
than the servers it measures. It still shares the cores with the server: say so with the table.

``p4``          the Procfile's web line vs the reference, 30 s each, one after the other.
``p4 --sweep``  gunicorn worker classes and counts (shorter runs) to choose the Procfile's line.
Goal: Django req/s ÷ reference req/s ≥ 1.0 and p99 ≤ 50 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pymupdf

from bench import common, stack

BOUNDARY = "----benchboundary7MA4YWxkTrZu0gW"
TARGET_BYTES = 1_000_000

LUA = r"""
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
wrk.headers["Content-Type"] = "multipart/form-data; boundary=" .. os.getenv("BENCH_BOUNDARY")
local token = os.getenv("BENCH_TOKEN")
if token and token ~= "" then wrk.headers["Authorization"] = "Token " .. token end

local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) statuses = {} end
function response(status, headers, body) statuses[status] = (statuses[status] or 0) + 1 end
function done(summary, latency, requests)
  local counts = {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("statuses")) do counts[tostring(k)] = (counts[tostring(k)] or 0) + v end
  end
  local parts = {}
  for k, v in pairs(counts) do table.insert(parts, string.format('"%s": %d', k, v)) end
  io.write(string.format(
    'BENCH {"requests": %d, "duration_us": %d, "p50_us": %d, "p90_us": %d, "p99_us": %d, "max_us": %d, ' ..
    '"mean_us": %.1f, "errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
    '"statuses": {%s}}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, latency.mean, summary.errors.connect, summary.errors.read,
    summary.errors.write, summary.errors.status, summary.errors.timeout, table.concat(parts, ", ")))
end
"""


def upload_pdf() -> Path:
    """A real ~1 MB PDF: the dev PDFs with text (and the scan) merged until 1 MB is passed."""
    out = common.RESULTS / "p4-upload.pdf"
    if out.exists() and out.stat().st_size >= TARGET_BYTES:
        return out
    sources = [
        "multi_page.pdf",
        "table_page_2305.03393v1-pg9.pdf",
        "code_and_formula.pdf",
        "table_nics-background-checks-2015-11.pdf",
        "scanned_ocr_test.pdf",
    ]
    merged = pymupdf.open()
    i = 0
    while True:
        with pymupdf.open(common.DEV / sources[i % len(sources)]) as src:
            merged.insert_pdf(src)
        i += 1
        data = merged.tobytes(garbage=0, deflate=True)
        if len(data) >= TARGET_BYTES:
            break
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out


def multipart_body(pdf: Path) -> Path:
    body = (
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="report.pdf"\r\n'
            f"Content-Type: application/pdf\r\n\r\n"
        ).encode()
        + pdf.read_bytes()
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )
    path = common.RESULTS / "p4-body.bin"
    path.write_bytes(body)
    return path


def wrk(port: int, seconds: int, connections: int, body: Path, token: str) -> dict:
    script = common.RESULTS / "p4-upload.lua"
    script.write_text(LUA)
    environ = {"BENCH_BODY": str(body), "BENCH_BOUNDARY": BOUNDARY, "BENCH_TOKEN": token, "PATH": "/usr/bin:/bin"}
    threads = min(connections, max(1, (os.cpu_count() or 1)))
    cmd = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds}s",
        "--timeout",
        "30s",
        "-s",
        str(script),
        f"http://127.0.0.1:{port}/api/v1/jobs",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, env=environ, timeout=seconds + 120)
    line = next((l for l in out.stdout.splitlines() if l.startswith("BENCH ")), None)
    if line is None:
        raise RuntimeError(f"wrk gave no result:\n{out.stdout}\n{out.stderr}")
    result = json.loads(line[len("BENCH ") :])
    result["req_s"] = result["requests"] / (result["duration_us"] / 1e6)
    ok = result["statuses"].get("202", 0)
    result["ok_s"] = ok / (result["duration_us"] / 1e6)
    return result


def _gunicorn(port: int, cls: str, workers: int, threads: int = 1) -> str:
    app = "ocrsite.asgi:application" if cls == "uvicorn" else "ocrsite.wsgi:application"
    worker_class = "uvicorn_worker.UvicornWorker" if cls == "uvicorn" else cls
    extra = f" --threads {threads}" if cls == "gthread" else ""
    return (
        f"{stack.BIN}/gunicorn {app} --bind 127.0.0.1:{port} --workers {workers} --worker-class {worker_class}{extra}"
    )


def _reference(port: int, workers: int) -> str:
    return (
        f"{stack.BIN}/uvicorn bench.ingest_ref:app --host 127.0.0.1 --port {port} --workers {workers} "
        f"--log-level warning --no-access-log"
    )


def _jobs_in_db() -> int:
    script = "from apps.jobs.models import Job; print(Job.objects.count())"
    out = subprocess.run(
        [str(stack.BIN / "python"), "manage.py", "shell", "-c", script],
        cwd=common.ROOT,
        env=stack.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip().splitlines()[-1])


def measure(
    label: str, cmd: str, port: int, seconds: int, connections: int, body: Path, token: str, count_jobs: bool
) -> dict:
    stack.reset()
    if count_jobs:
        stack.purge_jobs()
    web = stack.start_web(cmd, port, name=f"p4-{label.replace(' ', '_').replace('/', '_')}")
    try:
        time.sleep(1)
        load = common.loadavg()
        result = wrk(port, seconds, connections, body, token)
    finally:
        web.stop()
    r = stack.redis_client()
    result["queued_messages"] = int(r.llen("cpu")) + int(r.llen("bench:ingest-ref"))
    if count_jobs:
        result["job_rows"] = _jobs_in_db()
    result.update({"label": label, "command": cmd, "load": load})
    stack.reset()  # purge what was queued: no worker will ever take it
    return result


def run(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="bench p4")
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--sweep", action="store_true", help="compare gunicorn worker classes and counts")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed: apt-get install -y wrk")

    info = common.machine()
    cores = os.cpu_count() or 1
    token = stack.prepare_database()
    pdf = upload_pdf()
    body = multipart_body(pdf)
    with pymupdf.open(pdf) as doc:
        pages = len(doc)
    port = stack.free_port()

    if args.sweep:
        candidates = [
            ("gunicorn sync ×2", _gunicorn(port, "sync", 2)),
            ("gunicorn sync ×4", _gunicorn(port, "sync", 4)),
            ("gunicorn gthread 2×4", _gunicorn(port, "gthread", 2, 4)),
            ("gunicorn gthread 4×4", _gunicorn(port, "gthread", 4, 4)),
            ("gunicorn uvicorn-worker ×2 (ASGI)", _gunicorn(port, "uvicorn", 2)),
            ("gunicorn uvicorn-worker ×4 (ASGI)", _gunicorn(port, "uvicorn", 4)),
        ]
    else:
        candidates = [("Procfile web line", stack.procfile_web(port))]
    reference = (f"reference Starlette ×{cores} (uvicorn)", _reference(port, cores))

    results = []
    # Reference first and last in a sweep, so drift in the box's load over the sweep shows.
    plan = [reference, *candidates] + ([reference] if args.sweep else [])
    for label, cmd in plan:
        is_ref = label.startswith("reference")
        results.append(
            measure(
                label, cmd, port, args.seconds, args.connections, body, "" if is_ref else token, count_jobs=not is_ref
            )
        )
    ref_rate = common.median(r["ok_s"] for r in results if r["label"].startswith("reference"))

    rows = []
    for r in results:
        ratio = r["ok_s"] / ref_rate if ref_rate else float("nan")
        is_ref = r["label"].startswith("reference")
        p99_ms = r["p99_us"] / 1000
        goal = "—" if is_ref else ("met" if ratio >= 1.0 and p99_ms <= 50 else "not met")
        rows.append(
            [
                r["label"],
                r["ok_s"],
                r["p50_us"] / 1000,
                p99_ms,
                r["max_us"] / 1000,
                json.dumps(r["statuses"]),
                sum(r["errors"].values()),
                r.get("job_rows", "—"),
                r["queued_messages"],
                ratio,
                r["load"],
                goal,
            ]
        )

    extra = {
        "load": f"wrk -t{min(args.connections, cores)} -c{args.connections} -d{args.seconds}s --timeout 30s, "
        f"one multipart POST /api/v1/jobs of a {pdf.stat().st_size / 1e6:.2f} MB, {pages}-page PDF "
        "(dev PDFs merged)",
        "note": f"wrk runs on the same {cores} cores as the server and takes part of them",
        "server env": "PostgreSQL ocr_bench, Redis db 2, media /tmp/media_bench; per-tenant rate limit and "
        "daily quota lifted (one tenant sends everything); no worker runs",
    }
    title = "P4 — ingest under 64 concurrent 1 MB uploads" + (" (worker class sweep)" if args.sweep else "")
    md = common.header(title, info, extra)
    md += "\n" + common.table(
        [
            "server",
            "202/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "statuses",
            "wrk errors (non-2xx incl.)",
            "job rows",
            "queued msgs",
            "ratio to reference",
            "load avg at start",
            "goal (ratio ≥ 1, p99 ≤ 50 ms)",
        ],
        rows,
    )
    md += "\n"
    data = {"machine": info, "results": results}
    common.report("p4sweep" if args.sweep else "p4", title, md, data)
    return data
