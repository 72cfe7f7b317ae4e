"""Layout batching: batch fill under a burst, and what a lone page pays for the window.

Real stack pieces: PostgreSQL (database ``ocr_gpu_bench``), Redis db 3, a ``cpu`` worker that
ingests, and one ``layout`` worker (one process, as a GPU worker runs) whose collector merges
pages; the CPU layout engine stands in for PaddleOCR. Nothing consumes ``ocr``: recognition is
not what is measured (the db is flushed at the start of each run).

- burst, pre-queued: 50 one-page jobs ingested first, then the layout worker starts: the fill
  the collector reaches when pages are waiting (GPU worker scaled from zero onto a backlog).
- burst, live: the layout worker runs while the 50 jobs are submitted as fast as ingest makes
  pages (on this box ingest, not layout, sets the arrival rate).
- lone page: single jobs one at a time into an idle layout worker, with the window at
  OCR_BATCH_WINDOW_MS and at 0; the time from ingest's end to the layout pass's start, whose
  median difference is the window's cost to a page that arrives alone.

    python -m bench.gpu_layout [--jobs 50] [--lone 8] [--window-ms 100]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time

os.environ.setdefault("BENCH_DB_NAME", "ocr_gpu_bench")
os.environ.setdefault("BENCH_BROKER_URL", "redis://127.0.0.1:6379/3")
os.environ.setdefault("BENCH_MEDIA_ROOT", "/tmp/media_gpu_bench")

from bench import stack
from bench.common import header, loadavg, machine, report, table

STARTED: list[stack.Proc] = []  # stopped in run()'s finally, whatever fails


def small_page(n: int) -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (360, 120), "white")
    ImageDraw.Draw(img).text((20, 50), f"Burst page number {n}", fill="black")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def worker(name: str, queues: str, concurrency: int, **extra: str) -> stack.Proc:
    proc = stack.start_worker(concurrency, stack.env(**extra), name=f"gpu-{name}", queues=queues)
    STARTED.append(proc)
    return proc


def submit(n: int) -> str:
    from apps.jobs import services

    data = small_page(n)
    job = services.submit(services.Upload(io.BytesIO(data), f"bench-{n}.png", len(data)))
    return str(job.pk)


def wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def pages_in(ids: list[str], status: str) -> int:
    from apps.jobs.models import Page

    return Page.objects.filter(job_id__in=ids, status=status).count()


def batch_sizes(ids: list[str]) -> list[int]:
    from apps.jobs.models import StageEvent

    return [e.detail["batch"] for e in StageEvent.objects.filter(job_id__in=ids, stage="layout", outcome="ok")]


def burst(jobs: int, window_ms: int, prequeued: bool) -> dict:
    layout = None if prequeued else worker("layout", "layout", 1, OCR_BATCH_WINDOW_MS=str(window_ms))
    t0 = time.perf_counter()
    ids = [submit(n) for n in range(jobs)]
    if prequeued:
        wait(lambda: pages_in(ids, "queued") == jobs, 300, "every page ingested")
        layout = worker("layout", "layout", 1, OCR_BATCH_WINDOW_MS=str(window_ms))
        t0 = time.perf_counter()
    wait(lambda: len(batch_sizes(ids)) == jobs, 300, "every page through layout")
    wall = time.perf_counter() - t0
    layout.stop()
    sizes = batch_sizes(ids)
    passes = len(sizes) and sum(1 / s for s in sizes)  # each pass of size s has s events
    return {
        "jobs": jobs,
        "pages_weighted_mean_batch": round(statistics.mean(sizes), 2),
        "passes": round(passes),
        "mean_batch_per_pass": round(len(sizes) / passes, 2),
        "batch_histogram": {s: sizes.count(s) // s for s in sorted(set(sizes))},
        "wall_s": round(wall, 2),
    }


def lone(count: int, window_ms: int) -> dict:
    from apps.jobs.models import StageEvent

    layout = worker("layout", "layout", 1, OCR_BATCH_WINDOW_MS=str(window_ms))
    waits = []
    for n in range(count):
        job_id = submit(1000 + n)
        wait(
            lambda j=job_id: StageEvent.objects.filter(job_id=j, stage="layout").exists(),
            60,
            "a lone page through layout",
        )
        ingest = StageEvent.objects.get(job_id=job_id, stage="ingest")
        layout_event = StageEvent.objects.get(job_id=job_id, stage="layout")
        waits.append((layout_event.started_at - ingest.finished_at).total_seconds() * 1000)
        time.sleep(0.3)  # the collector's buffer is empty again: the next page arrives alone
    layout.stop()
    return {
        "window_ms": window_ms,
        "median_ms": round(statistics.median(waits), 1),
        "p90_ms": round(sorted(waits)[int(0.9 * (len(waits) - 1))], 1),
        "samples": [round(w, 1) for w in waits],
    }


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_layout")
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--lone", type=int, default=8)
    parser.add_argument("--window-ms", type=int, default=100)
    ns = parser.parse_args(argv)
    info = machine()
    info["command"] = " ".join(["python -m bench.gpu_layout", *argv])
    load_before = loadavg()
    stack.prepare_database()
    stack.reset()
    for key, value in stack.env().items():
        if key in ("DATABASE_URL", "CELERY_BROKER_URL", "OCR_MEDIA_ROOT", "DJANGO_SETTINGS_MODULE"):
            os.environ[key] = value
    import django

    django.setup()
    from ocrsite.celery import app  # noqa: F401  (the app apps.jobs.enqueue sends with)

    batch = int(stack.env().get("OCR_LAYOUT_BATCH", "8"))
    try:
        worker("ingest", "cpu", 2)
        pre = burst(ns.jobs, ns.window_ms, prequeued=True)
        live = burst(ns.jobs, ns.window_ms, prequeued=False)
        with_window = lone(ns.lone, ns.window_ms)
        without = lone(ns.lone, 0)
    finally:
        for proc in STARTED:
            proc.stop()
        stack.reset()
    penalty = with_window["median_ms"] - without["median_ms"]
    text = header(
        "Layout collector: batch fill under a burst, lone-page penalty",
        info,
        {
            "stack": "PostgreSQL + Redis + celery workers (cpu: 2 processes ingest; layout: 1 process, CPU layout engine)",
            "settings": f"OCR_LAYOUT_BATCH={batch}, OCR_BATCH_WINDOW_MS={ns.window_ms}",
            "load average": f"{load_before} before, {loadavg()} after",
        },
    )
    text += "\n" + table(
        ["burst", "jobs", "mean batch (page-weighted)", "mean batch per pass", "passes by size", "fill", "wall s"],
        [
            [
                name,
                r["jobs"],
                r["pages_weighted_mean_batch"],
                r["mean_batch_per_pass"],
                r["batch_histogram"],
                f"{r['pages_weighted_mean_batch'] / batch:.0%}",
                r["wall_s"],
            ]
            for name, r in (("pre-queued", pre), ("live (ingest-paced)", live))
        ],
    )
    text += "\n\n" + table(
        ["lone page", "ingest end → layout start, median ms", "p90 ms"],
        [[f"window {r['window_ms']} ms", r["median_ms"], r["p90_ms"]] for r in (with_window, without)],
    )
    text += f"\n\nLone-page penalty of the window: {penalty:.0f} ms (median difference; window {ns.window_ms} ms).\n"
    report(
        "gpu_layout",
        "Layout collector",
        text,
        {
            "machine": info,
            "prequeued": pre,
            "live": live,
            "lone_window": with_window,
            "lone_no_window": without,
            "penalty_ms": penalty,
        },
    )


if __name__ == "__main__":
    run(sys.argv[1:])
