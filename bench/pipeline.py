"""pipeline: its overhead. Pages/s through REST + Celery + Redis with W worker processes against
the same engines called directly in a loop on the same pages by W processes.

Pipeline side: gunicorn started with the Procfile's web line, one celery worker consuming
cpu,layout,ocr with ``--concurrency W`` (W prefork children), PostgreSQL ``ocr_bench``, Redis db 2.
Each page is uploaded as its own PNG job (``POST /api/v1/jobs``), so every page goes through
ingest → layout → recognize → assemble with its database writes and broker hops; the clock runs
from the first upload to the last job's ``finished_at``.
Direct side: W processes, each with its own RapidLayoutEngine + RapidOcrRecognizer, pull the same
PNG bytes from a queue and do decode → layout → recognize; the clock runs from the start signal
to the last result.
Both sides load and warm their models before the clock starts: each direct process runs a page
first; on the pipeline side warm-up jobs are sent until every prefork child has finished each
stage (checked from the pids bench.celery_warm notes, not assumed). Both use the same engine
settings and the same threads per process (OCR_ENGINE_THREADS = cores // W, so W processes never
ask for more threads than there are cores), and alternate run by run, ≥ 3 rounds of 24 pages by
default so one slow page is noise. Goal: pipeline/direct ≥ 0.95 (median of the per-round ratios).
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing as mp
import os
import time
from pathlib import Path

import httpx

from bench import celery_warm, common, stack

# --- direct side ---------------------------------------------------------------------------------


def _direct_worker(threads: int, warm: bytes, tasks, results, ready, start, orient: bool = False) -> None:
    os.environ["OCR_ENGINE_THREADS"] = str(threads)
    from apps.jobs.documents import load_image_frame
    from bench.engines import django_settings, production_config
    from workers.engines.cpu import CpuLayoutConfig, RapidLayoutEngine, RapidOcrRecognizer

    s = django_settings()
    layout = RapidLayoutEngine(CpuLayoutConfig(threads=threads))
    recognizer = RapidOcrRecognizer(production_config(threads=threads))
    reader = None
    if orient:  # the product's ingest checks each scanned page's orientation by reading it
        from workers.content.orientation import upright
        from workers.engines.cpu.orientation import OrientationReader

        reader = OrientationReader()
        reader.load()

    def one(data: bytes) -> int:
        image, _dpi = load_image_frame(data, 0, s.OCR_MAX_IMAGE_PIXELS)
        if reader is not None:
            image, _found = upright(image, reader)
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


def run_direct(pages: list[bytes], workers: int, threads: int, orient: bool = False) -> dict:
    ctx = mp.get_context("spawn")  # onnxruntime thread pools do not survive fork
    tasks, results, ready, start = ctx.Queue(), ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [
        ctx.Process(target=_direct_worker, args=(threads, pages[0], tasks, results, ready, start, orient), daemon=True)
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


# What every child must have run before the clock: the stages that load models (layout,
# recognition) and ingest (PDF/PNG decoding). Assembly loads nothing, and Celery hands it to
# whichever child is free when a job's last page ends, so one child may never get one.
STAGES = ("workers.ingest", "workers.detect_layout", "workers.recognize")


def warm_children(client: httpx.Client, worker: stack.Proc, pages: list[bytes], w: int, log: str) -> dict:
    """Send warm-up jobs until every prefork child has finished each of STAGES at least once.

    Checked, not assumed: the worker runs bench.celery_warm, which notes the pid of each finished
    task; the children are read from /proc. Raises if some child is still cold after 10 batches.
    """
    batches = 0
    while True:
        pids = celery_warm.children(worker.proc.pid)
        ran = celery_warm.ran(log)
        cold = {pid: sorted(set(STAGES) - ran.get(pid, set())) for pid in pids}
        cold = {pid: missing for pid, missing in cold.items() if missing}
        if len(pids) == w and not cold:
            return {"children": sorted(pids), "batches": batches}
        if batches >= 10:
            raise RuntimeError(f"children still cold after {batches} warm-up batches: {cold} (pids {sorted(pids)})")
        run_pipeline(client, pages[: 2 * w])
        batches += 1


def _spread(values: list[float], fmt: str = "{:.3f}") -> str:
    return "–".join(fmt.format(v) for v in (min(values), common.median(values), max(values)))


def run(argv: list[str]) -> list[dict]:
    parser = argparse.ArgumentParser(prog="bench pipeline")
    parser.add_argument("--workers", default="1,2", help="comma-separated W values")
    parser.add_argument("--rounds", type=int, default=3, help="runs per side and W (alternating)")
    parser.add_argument(
        "--direct-orientation",
        action="store_true",
        help="the direct loop checks each page's orientation by reading too, as ingest does: the ratio is then plumbing only",
    )
    parser.add_argument("--copies", type=int, default=4, help="how many times the 6 pages are sent (4: 24 pages a run)")
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

    rows, raw, out_rows, warm_notes = [], [], [], []
    for w in [int(x) for x in args.workers.split(",") if x.strip()]:
        threads = max(1, cores // w)
        stack.reset()
        stack.purge_jobs()
        task_log = str(stack.LOGS / f"pipeline-w{w}-tasks.log")
        stack.LOGS.mkdir(parents=True, exist_ok=True)
        Path(task_log).unlink(missing_ok=True)
        # The cache off: every round sends the same pages, and each must be work, not a cache hit.
        environ = stack.env(OCR_ENGINE_THREADS=str(threads), BENCH_TASK_LOG=task_log, OCR_RESULT_CACHE="false")
        web = stack.start_web(web_cmd, port, name=f"pipeline-web-w{w}", environ=environ)
        worker = None
        try:
            worker = stack.start_worker(w, environ, name=f"pipeline-w{w}", app="bench.celery_warm")
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}", timeout=60, headers={"Authorization": f"Token {token}"}
            ) as client:
                # Every prefork child loads its models and runs each stage once before the clock.
                warm = warm_children(client, worker, pages, w, task_log)
                warm_notes.append(
                    f"W={w}: children {warm['children']} each ran {', '.join(STAGES)} after "
                    f"{warm['batches']} warm-up batch(es) of {2 * w} pages"
                )
                direct_runs, pipe_runs = [], []
                for r in range(args.rounds):
                    order = ("direct", "pipeline") if r % 2 == 0 else ("pipeline", "direct")
                    for side in order:
                        if side == "direct":
                            direct_runs.append(run_direct(pages, w, threads, args.direct_orientation))
                        else:
                            pipe_runs.append(run_pipeline(client, pages))
                        loads.append(common.loadavg())
                        print(
                            f"W={w} round {r + 1} {side}: "
                            f"{(direct_runs if side == 'direct' else pipe_runs)[-1]['pages_per_s']:.3f} pages/s "
                            f"(load {loads[-1]})",
                            flush=True,
                        )
                if celery_warm.children(worker.proc.pid) != set(warm["children"]):
                    # A replaced child started cold inside the clock: say so rather than hide it.
                    warm_notes.append(f"W={w}: a pool process was replaced during the measured runs")
        finally:
            if worker:
                worker.stop()
            web.stop()
        d = [x["pages_per_s"] for x in direct_runs]
        p = [x["pages_per_s"] for x in pipe_runs]
        ratios = [pp / dd for pp, dd in zip(p, d, strict=True)]
        ratio = common.median(ratios)
        rows.append(
            [
                w,
                threads,
                len(pages),
                _spread(d),
                _spread(p),
                _spread(ratios, "{:.2f}"),
                "met" if ratio >= 0.95 else "not met",
            ]
        )
        raw.append({"workers": w, "threads": threads, "direct": direct_runs, "pipeline": pipe_runs})
        out_rows.append(
            {
                "bench": "pipeline",
                "measure": f"pages/s, W={w} process(es) × {threads} thread(s), {len(pages)} pages a run",
                "ours": round(common.median(p), 3),
                "reference": round(common.median(d), 3),
                "ratio": round(ratio, 2),
                "spread": f"pipeline {_spread(p)}, direct {_spread(d)}; ratio {_spread(ratios, '{:.2f}')}",
                "goal": "ratio ≥ 0.95",
                "met": "yes" if ratio >= 0.95 else "no",
            }
        )
    stack.redis_client().flushdb()  # nothing of ours left queued

    extra = {
        "load average (start, after each run)": " → ".join(loads),
        "web": f"`{web_cmd}` (Procfile web line)",
        "worker": "`celery -A bench.celery_warm worker -Q cpu,layout,ocr --concurrency W` (prefork; the "
        "product's app plus a per-task pid note for the warm-up check), PostgreSQL ocr_bench, Redis db 2",
        "pages": f"{len(pages)} PNG pages a run (multi_page.pdf ×5 + scanned_ocr_test.pdf, {s.OCR_DPI} dpi, "
        f"×{args.copies}), one job each",
        "rounds": f"{args.rounds} per side and W, alternating (direct first in odd rounds, pipeline first in even)",
        "direct loop": "load, orientation check by reading, layout, recognition"
        if args.direct_orientation
        else "load, layout, recognition (no orientation check: the pipeline's ingest does one)",
        "warm-up check": "; ".join(warm_notes),
    }
    md = common.header("pipeline — its overhead (REST + Celery + Redis vs direct engine loop)", info, extra)
    md += "\n" + common.table(
        [
            "W processes",
            "threads each",
            "pages a run",
            "direct pages/s (min–median–max)",
            "pipeline pages/s (min–median–max)",
            "per-round ratio (min–median–max)",
            "goal: median ≥ 0.95",
        ],
        rows,
    )
    md += "\n"
    data = {"machine": info, "rows": rows, "runs": raw}
    common.report("pipeline", "pipeline", md, data)
    return out_rows
