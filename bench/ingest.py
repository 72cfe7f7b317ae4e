"""ingest:  1 MB PDF uploads from 64 concurrent clients against ``POST /api/v1/jobs`` (→ 202, a
Job row and an ingest message in Redis; no worker runs), next to bench/ingest_ref.py: a plain
WSGI callable doing the same work (token SELECT, in-memory multipart, the product's own probe,
sha256, the backpressure queries, the file written, one INSERT into a copy of ``jobs_job``, the
Celery-shaped message LPUSHed and its task-sent event PUBLISHed).

Like with like: both run under the Procfile's web line (same gunicorn worker class, workers and
threads; only the WSGI application differs), both are started once and warmed with a wrk run
before any clock, and the measured runs alternate (product, reference, reference, product, ...)
so drift in a shared box's load lands on both. Before each run the job tables, the Redis db and
the media folder are emptied, so every run starts from the same state.

Load comes from ``wrk`` (C, one thread per core; its Lua script sends the prebuilt multipart
body and counts statuses), because a Python load generator would take more of the cores than
the servers it measures. It still shares the cores with the server: the report says so.

Goal: product 202/s ÷ reference 202/s ≥ 1.0 and p99 ≤ 50 ms.
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
    out = common.RESULTS / "ingest-upload.pdf"
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
    path = common.RESULTS / "ingest-body.bin"
    path.write_bytes(body)
    return path


def wrk(port: int, seconds: int, connections: int, body: Path, token: str) -> dict:
    script = common.RESULTS / "ingest-upload.lua"
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


def _reference_cmd(product_cmd: str) -> str:
    """The product's gunicorn line with only the application swapped."""
    if "ocrsite.wsgi:application" not in product_cmd:
        raise RuntimeError(f"the Procfile's web line no longer serves ocrsite.wsgi:application: {product_cmd}")
    return product_cmd.replace("ocrsite.wsgi:application", "bench.ingest_ref:app")


def _psql(sql: str) -> str:
    out = subprocess.run(
        ["psql", stack.DB_URL.replace("postgres://", "postgresql://", 1), "-v", "ON_ERROR_STOP=1", "-tAqc", sql],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise RuntimeError(f"psql failed: {out.stderr.strip()}")
    return out.stdout.strip()


def prepare_reference_table() -> None:
    """``ingest_ref_job``: jobs_job's columns, defaults, checks and indexes, plus its owner FK."""
    _psql(
        "DROP TABLE IF EXISTS ingest_ref_job; "
        "CREATE TABLE ingest_ref_job (LIKE jobs_job INCLUDING ALL); "
        "ALTER TABLE ingest_ref_job ADD CONSTRAINT ingest_ref_job_owner_fk FOREIGN KEY (owner_id) "
        "REFERENCES auth_user (id) DEFERRABLE INITIALLY DEFERRED;"
    )


def _empty() -> None:
    """The same start for every run: no jobs on either side, nothing queued, no media."""
    _psql("TRUNCATE jobs_job, ingest_ref_job CASCADE;")
    stack.reset()


def _counts(side: str) -> tuple[int, int]:
    """Rows written and messages queued: every 202 must have left both behind."""
    table, queue = ("jobs_job", "cpu") if side == "product" else ("ingest_ref_job", "bench:ingest-ref")
    return int(_psql(f"SELECT count(*) FROM {table}")), int(stack.redis_client().llen(queue))


def _cpu_per_upload(body: Path, token: str, n: int) -> dict:
    """CPU ms per upload for both sides in one process (bench/ingest_cpu.py), tables emptied after."""
    _empty()
    out = subprocess.run(
        [str(stack.BIN / "python"), "-m", "bench.ingest_cpu", str(body), token, str(n)],
        cwd=common.ROOT,
        env=stack.env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    _empty()
    line = next((l for l in reversed(out.stdout.splitlines()) if l.startswith("{")), None)
    if out.returncode != 0 or line is None:
        raise RuntimeError(f"bench.ingest_cpu failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return json.loads(line)


def _spread(values: list[float], fmt: str = "{:.1f}") -> str:
    return "–".join(fmt.format(v) for v in (min(values), common.median(values), max(values)))


def run(argv: list[str]) -> list[dict]:
    parser = argparse.ArgumentParser(prog="bench ingest")
    parser.add_argument("--seconds", type=int, default=30, help="length of each measured run")
    parser.add_argument("--warmup", type=int, default=10, help="wrk seconds per server before any clock")
    parser.add_argument("--rounds", type=int, default=3, help="measured runs per side, alternating")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--cpu-requests", type=int, default=30, help="uploads per in-process CPU sample (0: skip)")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise RuntimeError("wrk is not installed: bash .ci/bench-tools.sh (apt-get install -y wrk)")

    info = common.machine()
    cores = os.cpu_count() or 1
    token = stack.prepare_database()
    prepare_reference_table()
    pdf = upload_pdf()
    body = multipart_body(pdf)
    with pymupdf.open(pdf) as doc:
        pages = len(doc)

    ports = {"product": stack.free_port(), "reference": stack.free_port()}
    cmds = {"product": stack.procfile_web(ports["product"])}
    cmds["reference"] = _reference_cmd(stack.procfile_web(ports["reference"]))
    load_before = common.loadavg()
    servers = {}
    runs: list[dict] = []
    try:
        for side in ("product", "reference"):
            servers[side] = stack.start_web(cmds[side], ports[side], name=f"ingest-{side}")
        for side in ("product", "reference"):
            _empty()
            warm = wrk(ports[side], args.warmup, args.connections, body, token)
            print(f"warm-up {side}: {args.warmup} s, {warm['ok_s']:.1f} 202/s", flush=True)
        for r in range(args.rounds):
            order = ("product", "reference") if r % 2 == 0 else ("reference", "product")
            for side in order:
                _empty()
                load = common.loadavg()
                result = wrk(ports[side], args.seconds, args.connections, body, token)
                time.sleep(2)  # requests in flight when wrk stopped still finish: count after them
                result["rows"], result["queued_messages"] = _counts(side)
                result.update({"side": side, "round": r + 1, "load": load})
                runs.append(result)
                print(
                    f"round {r + 1} {side}: {result['ok_s']:.1f} 202/s, p99 {result['p99_us'] / 1000:.0f} ms "
                    f"(load {load})",
                    flush=True,
                )
        for proc in servers.values():
            proc.stop()
        cpu = _cpu_per_upload(body, token, args.cpu_requests) if args.cpu_requests else None
    finally:
        for proc in servers.values():
            proc.stop()
        _empty()  # nothing of ours left queued or stored: no worker will ever take it
    load_after = common.loadavg()

    ours = [r for r in runs if r["side"] == "product"]
    ref = [r for r in runs if r["side"] == "reference"]
    # Each round's product run over the same round's reference run: pairs share the box's load.
    ratios = [o["ok_s"] / f["ok_s"] for o, f in zip(ours, ref, strict=True) if f["ok_s"]]
    ours_rate, ref_rate = common.median(r["ok_s"] for r in ours), common.median(r["ok_s"] for r in ref)
    ours_p99 = common.median(r["p99_us"] / 1000 for r in ours)
    ref_p99 = common.median(r["p99_us"] / 1000 for r in ref)
    ratio = common.median(ratios)
    met = ratio >= 1.0 and ours_p99 <= 50

    table_rows = [
        [
            r["round"],
            r["side"],
            r["ok_s"],
            r["p50_us"] / 1000,
            r["p99_us"] / 1000,
            r["max_us"] / 1000,
            json.dumps(r["statuses"]),
            sum(r["errors"].values()),
            r["rows"],
            r["queued_messages"],
            r["load"],
        ]
        for r in runs
    ]
    extra = {
        "load": f"wrk -t{min(args.connections, cores)} -c{args.connections} -d{args.seconds}s --timeout 30s, "
        f"one multipart POST /api/v1/jobs of a {pdf.stat().st_size / 1e6:.2f} MB, {pages}-page PDF "
        "(dev PDFs merged)",
        "product": f"`{cmds['product']}` (the Procfile's web line)",
        "reference": f"`{cmds['reference']}` (same line, bench/ingest_ref.py's WSGI app)",
        "method": f"both started once and warmed ({args.warmup} s of wrk each), then {args.rounds} measured "
        "runs per side alternating; tables, Redis db and media emptied before every run",
        "note": f"wrk runs on the same {cores} cores as the server and takes part of them",
        "server env": f"PostgreSQL {stack.DB_NAME}, Redis {stack.BROKER_URL.rsplit('/', 1)[-1]} (db), "
        f"media {stack.MEDIA}; per-tenant rate limit and daily quota lifted (one tenant sends everything); "
        "no worker runs",
        "load average before → after": f"{load_before} → {load_after}",
    }
    title = "ingest — under 64 concurrent 1 MB uploads"
    md = common.header(title, info, extra)
    md += "\n" + common.table(
        [
            "round",
            "server",
            "202/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "statuses",
            "wrk errors (non-2xx incl.)",
            "rows written",
            "queued msgs",
            "load avg at start",
        ],
        table_rows,
    )
    md += (
        f"\n\nMedian 202/s: product {ours_rate:.1f}, reference {ref_rate:.1f}; per-round ratio "
        f"{_spread(ratios, '{:.2f}')} (min–median–max); p99 product {ours_p99:.0f} ms, reference "
        f"{ref_p99:.0f} ms. Goal (ratio ≥ 1.0, p99 ≤ 50 ms): {'met' if met else 'not met'}.\n"
    )
    if cpu:
        md += (
            f"\nCPU per upload, in one process without a server (`python -m bench.ingest_cpu`, "
            f"{args.cpu_requests} uploads × 3 alternating samples, median): product {cpu['product_cpu_ms']:.1f} ms, "
            f"reference {cpu['reference_cpu_ms']:.1f} ms. Share of the product's CPU (cumulative, cProfile): "
            + "; ".join(f"{k} {v}%" for k, v in cpu["product_parts_pct"].items())
            + ".\n"
        )
    common.report("ingest", title, md, {"machine": info, "runs": runs, "commands": cmds, "cpu": cpu})
    spread = f"product {_spread([r['ok_s'] for r in ours])}, reference {_spread([r['ok_s'] for r in ref])} 202/s"
    return [
        {
            "bench": "ingest",
            "measure": f"ingest 202/s, {args.connections} clients × {pdf.stat().st_size / 1e6:.1f} MB PDF",
            "ours": round(ours_rate, 1),
            "reference": round(ref_rate, 1),
            "ratio": round(ratio, 2),
            "spread": spread + f"; ratio {_spread(ratios, '{:.2f}')}",
            "goal": "ratio ≥ 1.0",
            "met": "yes" if ratio >= 1.0 else "no",
        },
        {
            "bench": "ingest",
            "measure": "ingest p99 latency, ms",
            "ours": round(ours_p99),
            "reference": round(ref_p99),
            "ratio": round(ours_p99 / ref_p99, 2) if ref_p99 else "",
            "spread": f"product {_spread([r['p99_us'] / 1000 for r in ours], '{:.0f}')}, reference "
            f"{_spread([r['p99_us'] / 1000 for r in ref], '{:.0f}')} ms",
            "goal": "≤ 50 ms",
            "met": "yes" if ours_p99 <= 50 else "no",
        },
    ] + (
        [
            {
                "bench": "ingest",
                "measure": "ingest CPU ms per upload, in-process (diagnosis, lower is better)",
                "ours": round(cpu["product_cpu_ms"], 1),
                "reference": round(cpu["reference_cpu_ms"], 1),
                "ratio": round(cpu["product_cpu_ms"] / cpu["reference_cpu_ms"], 2),
                "spread": f"product {_spread(cpu['product_runs'])}, reference {_spread(cpu['reference_runs'])} ms",
            }
        ]
        if cpu
        else []
    )
