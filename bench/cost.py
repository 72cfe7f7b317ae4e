"""Pipeline cost per page on the CPU stack, from the workers' own CPU accounting (``workers.costs``).

The stack as the Procfile runs it (gunicorn, one worker on the online queues), the result cache
off. ``--scans`` jobs of the phototest scan (one page each: layout + recognition) and ``--born``
born-digital PDFs of ``--pages`` pages (text layer, read in ingest), each job's ``cost.cpu_seconds``
read from the API. Reported: worker CPU seconds per page of each kind, and the cost per 1,000
pages at ``--vcpu-hour`` dollars per vCPU-hour. The VLM stage's GPU figure is on paper: the
break-even throughput for ``--gpu-hour`` dollars per GPU-hour against the $0.50 goal.

``python -m bench cost [--scans 10] [--born 10] [--vcpu-hour 0.04] [--gpu-hour 2]``
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx
import pymupdf

from bench import stack
from bench.common import header, loadavg, machine, report, table, tree_cpu_seconds
from tests.support.documents import dev_file


def _job(client: httpx.Client, name: str, data: bytes) -> dict:
    resp = client.post("/api/v1/jobs", files={"file": (name, data)})
    resp.raise_for_status()
    job = resp.json()["id"]
    while True:
        body = client.get(f"/api/v1/jobs/{job}").json()
        if body["status"] in ("done", "failed", "cancelled"):
            if body["status"] != "done":
                raise RuntimeError(f"{name}: {body['status']} {body.get('error')}")
            return body
        time.sleep(0.2)


def _born(i: int, pages: int) -> bytes:
    doc = pymupdf.open()
    for p in range(pages):
        page = doc.new_page()
        for line in range(40):
            page.insert_text((72, 72 + 16 * line), f"Document {i} page {p + 1} line {line}: born-digital body text.")
    return doc.tobytes()


def _tree_cpu(procs: list[stack.Proc]) -> dict[str, float]:
    web, worker = procs
    return {"web": tree_cpu_seconds(web.proc.pid), "worker": tree_cpu_seconds(worker.proc.pid)}


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="cost")
    parser.add_argument("--scans", type=int, default=10)
    parser.add_argument("--born", type=int, default=10)
    parser.add_argument("--pages", type=int, default=3, help="pages of each born-digital PDF")
    parser.add_argument("--vcpu-hour", type=float, default=0.04, help="dollars per vCPU-hour")
    parser.add_argument("--gpu-hour", type=float, default=2.0, help="dollars per GPU-hour (A100-class)")
    args = parser.parse_args(argv)
    info = machine()
    load_before = loadavg()
    stack.reset()
    token = stack.prepare_database()
    stack.purge_jobs()
    environ = stack.env(OCR_RESULT_CACHE="false")
    port = stack.free_port()
    procs = [
        stack.start_web(stack.procfile_web(port), port, environ=stack.env(WEB_WORKERS="2", OCR_RESULT_CACHE="false"))
    ]
    try:
        procs.append(stack.start_worker(2, environ, name="cost"))
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Token {token}"}, timeout=60
        )
        scan = dev_file("phototest.tif").read_bytes()
        _job(client, "warm.tif", scan)  # engines loaded in both pool processes' first pages
        # What the bill sees beside what the jobs are charged: the worker's and the web's whole
        # process trees over each kind's jobs (Celery's message handling, connections, the
        # sweep's polls: work no job's steps count).
        marks = [_tree_cpu(procs)]
        scans = [_job(client, f"scan-{i}.tif", scan) for i in range(args.scans)]
        marks.append(_tree_cpu(procs))
        born = [_job(client, f"born-{i}.pdf", _born(i, args.pages)) for i in range(args.born)]
        marks.append(_tree_cpu(procs))
    finally:
        for proc in reversed(procs):
            proc.stop()

    def per_page(jobs: list[dict]) -> list[float]:
        return [j["cost"]["cpu_seconds"] / j["progress"]["pages_total"] for j in jobs]

    scan_s, born_s = per_page(scans), per_page(born)
    whole = {
        kind: {side: (marks[i + 1][side] - marks[i][side]) / max(1, pages) for side in ("worker", "web")}
        for i, (kind, pages) in enumerate((("scan", len(scans)), ("born", len(born) * args.pages)))
    }
    dollars = lambda cpu_s: cpu_s * 1000 / 3600 * args.vcpu_hour  # noqa: E731
    rows = [
        [
            "scan (layout + recognition)",
            len(scans),
            f"{statistics.median(scan_s):.3f}",
            f"{min(scan_s):.3f}–{max(scan_s):.3f}",
            f"{dollars(statistics.median(scan_s)):.4f}",
            f"{whole['scan']['worker']:.3f} + {whole['scan']['web']:.3f}",
            f"{dollars(whole['scan']['worker'] + whole['scan']['web']):.4f}",
        ],
        [
            f"born-digital ({args.pages} p, text layer)",
            len(born),
            f"{statistics.median(born_s):.3f}",
            f"{min(born_s):.3f}–{max(born_s):.3f}",
            f"{dollars(statistics.median(born_s)):.4f}",
            f"{whole['born']['worker']:.3f} + {whole['born']['web']:.3f}",
            f"{dollars(whole['born']['worker'] + whole['born']['web']):.4f}",
        ],
    ]
    break_even = 1000 / (0.5 / args.gpu_hour * 3600)
    text = header(
        "cost: worker CPU per page on the CPU stack, and the VLM stage on paper",
        info,
        {
            "load average (before, after)": f"{load_before}; {loadavg()}",
            "prices": f"${args.vcpu_hour}/vCPU-hour (CPU), ${args.gpu_hour}/GPU-hour (VLM stage, on paper)",
        },
    )
    headers = ["pages", "jobs", "CPU-s/page (median)", "min–max", "$ per 1,000 pages"]
    headers += ["whole processes: worker + web CPU-s/page", "$ per 1,000 pages (whole)"]
    text += "\n" + table(headers, rows)
    text += (
        "\n\nCPU-s/page is what the jobs are charged (`cost.cpu_seconds`: the stages' own CPU, their budgeted"
        " page readers included); the whole-process columns are the worker's and the web's process trees"
        " over the same jobs, divided by their pages: the difference is the platform's own handling"
        " (Celery, the broker, connections, HTTP), which no single page causes.\n"
    )
    text += (
        f"\n\nVLM stage on paper: at ${args.gpu_hour:g}/GPU-hour, $0.50 per 1,000 pages buys "
        f"{0.5 / args.gpu_hour * 3600:.0f} GPU-seconds, so the goal holds at ≥ {break_even:.2f} pages/s per GPU "
        "(VLM requests × their share of the GPU); not measured here (no GPU with the model).\n"
    )
    report(
        "cost",
        "cost per page",
        text,
        {"scan_cpu_s": scan_s, "born_cpu_s": born_s, "whole_cpu_s_per_page": whole, "break_even_pages_s": break_even},
    )
