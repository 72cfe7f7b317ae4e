"""P1: pipeline overhead. Pages/s through REST + Celery + Redis with W worker processes against
the same engines called directly in a loop on the same pages by W processes.

Pipeline side: gunicorn started with the Procfile's web line, one celery worker consuming
cpu,layout,ocr with ``--concurrency W`` (W prefork children), PostgreSQL ``ocr_bench``, Redis db 2.
Each page is uploaded as its own PNG job (``POST /api/v1/jobs``), so every page goes through
ingest → layout → recognize → assemble with its database writes and broker hops; the clock runs
from the first upload to the last job's ``finished_at``.
Direct side: W processes, each with its own RapidLayoutEngine + RapidOcrRecognizer, pull the same
PNG bytes from a queue and do decode → layout → recognize; the clock runs from the start signal
to the last result.
Both sides load and warm their models before the clock starts, use the same engine settings and
the same threads per process (OCR_ENGINE_THREADS = cores // W, so W processes never ask for more
threads than there are cores), and alternate run by run. Goal: pipeline/direct ≥ 0.95.
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing as mp
import os
import time

import httpx

from bench import common, stack

# --- direct side ---------------------------------------------------------------------------------


def _direct_worker(threads: int, warm: bytes, tasks, results, ready, start) -> None:
    os.environ["OCR_ENGINE_THREADS"] = str(threads)
    from apps.jobs.documents import load_image_frame
    from bench.engines import django_settings, production_config
    from workers.engines.cpu import CpuLayoutConfig, RapidLayoutEngine, RapidOcrRecognizer

    s = django_settings()
    layout = RapidLayoutEngine(CpuLayoutConfig(threads=threads))
    recognizer = RapidOcrRecognizer(production_config(threads=threads))

    def one(data: bytes) -> int:
        image, _dpi = load_image_frame(data, 0, s.OCR_MAX_IMAGE_PIXELS)
        boxes = layout.detect([image])[0]
        rec = recognizer.recognize(image, boxes)
        return sum(len(t.text) for t in rec.texts) + sum(len(t.text) for _b, t in rec.extra)

    one(warm)
    ready.put(os.getpid())
    start.wait()
    while True:
        item = tasks.get()
        if item is None:
            return
        index, data = item
        results.put((index, one(data), time.perf_counter()))


def run_direct(pages: list[bytes], workers: int, threads: int) -> dict:
    ctx = mp.get_context("spawn")  # onnxruntime thread pools do not survive fork
    tasks, results, ready, start = ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=_direct_worker, args=(threads, pages[0], tasks, results, ready, start), daemon=True)
        for _ in range(workers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=300)
    for i, data in enumerate(pages):
        tasks.put((i, data))
    for _ in procs:
        tasks.put(None)
    t0 = time.perf_counter()
    start.set()
    done = [results.get(timeout=600) for _ in pages]
    elapsed = max(t for _i, _n, t in done) - t0
    for p in procs:
        p.join(30)
    return {"pages": len(pages), "seconds": elapsed, "pages_per_s": len(pages) / elapsed}


# --- pipeline side -------------------------------------------------------------------------------


def _upload(client: httpx.Client, data: bytes, name: str) -> str:
    r = client.post("/api/v1/jobs", files={"file": (name, data, "image/png")})
    if r.status_code != 202:
        raise RuntimeError(f"upload answered {r.status_code}: {r.text[:300]}")
    return r.json()["id"]


def _wait(client: httpx.Client, ids: set[str], timeout: float = 600) -> dict[str, dict]:
    """Poll the list endpoint (one request per half second, so polling costs the box little)."""
    deadline = time.monotonic() + timeout
    seen: dict[str, dict] = {}
    while time.monotonic() < deadline:
        page = 1
        while True:
            body = client.get("/api/v1/jobs", params={"status": "done,failed,cancelled", "page": page}).json()
            for job in body.get("results", []):
                if job["id"] in ids:
                    seen[job["id"]] = job
            if not body.get("next"):
                break
            page += 1
        if len(seen) == len(ids):
            return seen
        time.sleep(0.5)
    raise RuntimeError(f"{len(ids) - len(seen)} jobs not finished after {timeout} s")


def run_pipeline(client: httpx.Client, pages: list[bytes]) -> dict:
    started = dt.datetime.now(dt.UTC)
    ids = {_upload(client, data, f"page-{i}.png") for i, data in enumerate(pages)}
    jobs = _wait(client, ids)
    failed = [j for j in jobs.values() if j["status"] != "done"]
    if failed:
        raise RuntimeError(f"{len(failed)} jobs did not finish: {failed[0]}")
    finished = max(dt.datetime.fromisoformat(j["finished_at"].replace("Z", "+00:00")) for j in jobs.values())
    elapsed = (finished - started).total_seconds()
    return {"pages": len(pages), "seconds": elapsed, "pages_per_s": len(pages) / elapsed}


# --- the benchmark -------------------------------------------------------------------------------


def _corpus(dpi: int, copies: int) -> list[bytes]:
    """OCR pages as PNG: multi_page.pdf's five pages and the scanned page, rendered at OCR_DPI."""
    from apps.jobs.documents import encode_png

    images = [common.render(common.DEV / "multi_page.pdf", i, dpi) for i in range(5)]
    images.append(common.render(common.DEV / "scanned_ocr_test.pdf", 0, dpi))
    return [encode_png(im) for im in images] * copies


def run(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="bench p1")
    parser.add_argument("--workers", default="1,2", help="comma-separated W values")
    parser.add_argument("--rounds", type=int, default=1, help="runs per side and W (alternating)")
    parser.add_argument("--copies", type=int, default=1, help="how many times the 6 pages are sent")
    args = parser.parse_args(argv)

    from bench.engines import django_settings

    s = django_settings()
    pages = _corpus(s.OCR_DPI, args.copies)
    info = common.machine()
    cores = os.cpu_count() or 1
    token = stack.prepare_database()
    port = stack.free_port()
    web_cmd = stack.procfile_web(port)
    loads = [common.loadavg()]

    rows, raw = [], []
    for w in [int(x) for x in args.workers.split(",") if x.strip()]:
        threads = max(1, cores // w)
        stack.reset()
        stack.purge_jobs()
        environ = stack.env(OCR_ENGINE_THREADS=str(threads))
        web = stack.start_web(web_cmd, port, name=f"p1-web-w{w}", environ=environ)
        worker = None
        try:
            worker = stack.start_worker(w, environ, name=f"p1w{w}")
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}", timeout=60, headers={"Authorization": f"Token {token}"}
            ) as client:
                # Warm every prefork child (model load, first-call allocations) before the clock.
                run_pipeline(client, pages[: 2 * w])
                direct_runs, pipe_runs = [], []
                for r in range(args.rounds):
                    order = ("direct", "pipeline") if r % 2 == 0 else ("pipeline", "direct")
                    for side in order:
                        if side == "direct":
                            direct_runs.append(run_direct(pages, w, threads))
                        else:
                            pipe_runs.append(run_pipeline(client, pages))
                        loads.append(common.loadavg())
        finally:
            if worker:
                worker.stop()
            web.stop()
        d = common.median(x["pages_per_s"] for x in direct_runs)
        p = common.median(x["pages_per_s"] for x in pipe_runs)
        rows.append([w, threads, len(pages), d, p, p / d, "met" if p / d >= 0.95 else "not met"])
        raw.append({"workers": w, "threads": threads, "direct": direct_runs, "pipeline": pipe_runs})
    stack.redis_client().flushdb()  # nothing of ours left queued

    extra = {
        "load average (start, after each run)": " → ".join(loads),
        "web": f"`{web_cmd}` (Procfile web line)",
        "worker": "`celery -A ocrsite worker -Q cpu,layout,ocr --concurrency W` (prefork), PostgreSQL ocr_bench, Redis db 2",
        "pages": f"{len(pages)} PNG pages (multi_page.pdf ×5 + scanned_ocr_test.pdf, {s.OCR_DPI} dpi), one job each",
        "rounds": f"{args.rounds} per side and W, alternating; median",
    }
    md = common.header("P1 — pipeline overhead (REST + Celery + Redis vs direct engine loop)", info, extra)
    md += "\n" + common.table(
        ["W processes", "threads each", "pages", "direct pages/s", "pipeline pages/s", "ratio", "goal ≥ 0.95"], rows
    )
    md += "\n"
    data = {"machine": info, "rows": rows, "runs": raw}
    common.report("p1", "P1", md, data)
    return data
