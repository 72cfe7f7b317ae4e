"""Online latency with and without a batch running on the bulk lane.

The stack as the Procfile runs it: gunicorn, one online worker (cpu, layout, ocr queues) and one
bulk worker at nice 19 (the bulk queue). The same scanned page is submitted online ``--rounds``
times, one after another, with nothing else running; then a batch of ``--docs`` generated
born-digital PDFs (1-3 pages, a unique marker each, OCR forced so every page costs recognition)
is started from a storage prefix, and once its jobs are running the same online rounds are
submitted again. The ratio is the median online latency with the batch over without it (goal
≤ 1.5). The result cache is off for this run: every online round must do its work.

``python -m bench bulk-lane [--rounds 8] [--docs 200] [--gap 2]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
import uuid

import httpx
import pymupdf

from bench import stack
from bench.common import ROOT, header, loadavg, machine, report, table
from tests.support.documents import dev_file


def _pdf(marker: str, pages: int) -> bytes:
    doc = pymupdf.open()
    for i in range(pages):
        page = doc.new_page()
        page.insert_text((72, 72), f"Archive document {marker}, page {i + 1}.", fontsize=11)
        page.insert_text((72, 100), "A born-digital line of body text for the bulk lane benchmark.", fontsize=11)
    return doc.tobytes()


def _online_round(client: httpx.Client, scan: bytes, gap: float = 0.0) -> float:
    time.sleep(gap)  # idle time between online jobs: what the bulk lane may use
    started = time.monotonic()
    resp = client.post("/api/v1/jobs", files={"file": ("scan.tif", scan)})
    resp.raise_for_status()
    job = resp.json()["id"]
    while True:
        body = client.get(f"/api/v1/jobs/{job}").json()
        if body["status"] in ("done", "failed", "cancelled"):
            if body["status"] != "done":
                raise RuntimeError(f"online job {job} ended {body['status']}: {body.get('error')}")
            return time.monotonic() - started
        time.sleep(0.1)


def _start_bulk_worker(environ: dict[str, str], concurrency: int) -> stack.Proc:
    cmd = [
        "nice",
        "-n",
        "19",
        str(stack.BIN / "celery"),
        "-A",
        "ocrsite",
        "worker",
        "-Q",
        "bulk",
        "-n",
        "bulk@%h",
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "INFO",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    proc = stack.Proc("worker-bulk", cmd, environ)
    deadline = time.monotonic() + 90
    while "ready." not in proc.log.read_text(errors="replace"):
        if not proc.alive() or time.monotonic() > deadline:
            proc.stop()
            raise RuntimeError(f"bulk worker did not start:\n{proc.tail()}")
        time.sleep(0.3)
    return proc


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bulk-lane")
    parser.add_argument("--rounds", type=int, default=8, help="online jobs per phase, one after another")
    parser.add_argument("--docs", type=int, default=200, help="documents in the batch")
    parser.add_argument("--concurrency", type=int, default=2, help="pool processes of each worker")
    parser.add_argument("--gap", type=float, default=2.0, help="seconds between online jobs, in both phases")
    args = parser.parse_args(argv)
    info = machine()
    load_before = loadavg()
    stack.reset()
    token = stack.prepare_database()
    # Small expansion steps: the bulk queue is FIFO, so a step's ingests run before its pages'
    # recognition; with the default 1,000 the batch would spend this run ingesting.
    environ = stack.env(
        OCR_RESULT_CACHE="false", OCR_BATCH_POLL_SECONDS="1", OCR_BATCH_EXPAND_CHUNK="8", OCR_BATCH_WINDOW="16"
    )
    prefix = f"archives/bench/{uuid.uuid4().hex[:8]}/"
    script = (
        f"from apps.api.models import Tenant; Tenant.objects.filter(slug='bench').update(batch_prefixes='{prefix}')"
    )
    subprocess.run([str(stack.BIN / "python"), "manage.py", "shell", "-c", script], cwd=ROOT, env=environ, check=True)
    for i in range(args.docs):
        path = stack.MEDIA / prefix / f"doc-{i:06d}.pdf"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_pdf(f"MARK{i:06d}", 1 + i % 3))
    scan = dev_file("phototest.tif").read_bytes()
    port = stack.free_port()
    procs = [
        stack.start_web(stack.procfile_web(port), port, environ=stack.env(WEB_WORKERS="2", OCR_RESULT_CACHE="false"))
    ]
    try:
        procs.append(stack.start_worker(args.concurrency, environ, name="online"))
        procs.append(_start_bulk_worker(environ, args.concurrency))
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Token {token}"}, timeout=60
        )
        _online_round(client, scan)  # warm-up: engines loaded in the online worker's processes
        alone = [_online_round(client, scan, args.gap) for _ in range(args.rounds)]
        batch = client.post("/api/v1/batches", json={"prefix": prefix, "ocr": "force"}).json()
        deadline = time.monotonic() + 600
        # The bulk lane is really at work (pages recognised) before the online rounds start.
        while client.get(f"/api/v1/batches/{batch['id']}").json()["progress"]["pages_done"] < 3:
            if time.monotonic() > deadline:
                raise RuntimeError("the batch did not start")
            time.sleep(0.5)
        before = client.get(f"/api/v1/batches/{batch['id']}").json()["progress"]
        t0 = time.monotonic()
        during = [_online_round(client, scan, args.gap) for _ in range(args.rounds)]
        window = time.monotonic() - t0
        after = client.get(f"/api/v1/batches/{batch['id']}").json()["progress"]
        client.delete(f"/api/v1/batches/{batch['id']}")
    finally:
        for proc in reversed(procs):
            proc.stop()
    bulk_pages = after["pages_done"] - before["pages_done"]
    ratio = statistics.median(during) / statistics.median(alone)
    rows = [
        ["online alone", args.rounds, f"{statistics.median(alone):.2f}", f"{min(alone):.2f}–{max(alone):.2f}", ""],
        [
            "online during the batch",
            args.rounds,
            f"{statistics.median(during):.2f}",
            f"{min(during):.2f}–{max(during):.2f}",
            f"{bulk_pages} bulk pages done in {window:.0f} s ({bulk_pages / window:.2f} pages/s)",
        ],
    ]
    text = header(
        "bulk-lane: online latency with and without a batch on the bulk lane",
        info,
        {
            "load average (before, after)": f"{load_before}; {loadavg()}",
            "workers": f"online: cpu,layout,ocr × {args.concurrency}; bulk: nice 19, bulk × {args.concurrency}",
            "batch": f"{args.docs} born-digital PDFs of 1-3 pages, ocr=force, from a storage prefix",
            "online jobs": f"phototest.tif, one at a time, {args.gap:g} s apart, in both phases",
        },
    )
    text += "\n" + table(["phase", "jobs", "median s", "min–max s", "bulk work meanwhile"], rows)
    text += f"\n\nratio (median during / median alone): **{ratio:.2f}** (goal ≤ 1.5)\n"
    report("bulk-lane", "bulk lane", text, {"alone": alone, "during": during, "ratio": ratio, "bulk_pages": bulk_pages})
