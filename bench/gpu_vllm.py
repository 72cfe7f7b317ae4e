"""vLLM dispatch: does the recognizer keep its in-flight bound full, and what does it cost per region?

The real ``VllmRecognizer`` sends region crops over real HTTP to the OpenAI-compatible test
server (``tests.support.openai_server``) run as a separate process with a fixed per-request latency
(standing in for a vLLM whose continuous batching answers every sequence in that time). Pages
are fed from several threads, as an ``ocr`` worker with a threads pool does, so the only limit
is the recognizer's bound. For each bound we report regions/s (ideal = bound / latency), the
in-flight count sampled every 5 ms while the run is in steady state, the server's peak, and the
dispatcher's own CPU per region (this process's CPU time / regions: crop, PNG encode, base64,
JSON, HTTP client, answer cleaning; the server's CPU is not in it).

    python -m bench.gpu_vllm [--latency-ms 200] [--bounds 1,16,64,256] [--regions-per-page 16]
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import cv2
import httpx
import numpy as np

from apps.jobs.documents import load_image_frame
from bench.common import DEV, ROOT, header, loadavg, machine, report, table
from bench.stack import free_port
from workers.engines.base import LayoutBox
from workers.engines.vllm import VllmConfig, VllmRecognizer, _crop


def page_and_regions(per_page: int) -> tuple[np.ndarray, list[LayoutBox]]:
    """A real scan (phototest.tif, 640×480 text page scaled to A4 width at 200 dpi) cut into
    ``per_page`` full-width line-height regions: crops like the ones layout sends."""
    path = DEV / "phototest.tif"
    if not path.exists():
        path = ROOT / "tests" / "data" / "phototest.tif"
    image, _ = load_image_frame(path.read_bytes(), 0, 60_000_000)
    scale = 1654 / image.shape[1]
    page = cv2.resize(image, (1654, int(image.shape[0] * scale)), interpolation=cv2.INTER_CUBIC)
    step = page.shape[0] // per_page
    return page, [LayoutBox("text", (20, i * step, 1634, i * step + step)) for i in range(per_page)]


def start_server(latency_ms: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.openai_server", "--port", str(port), "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("test server did not start")


def run_bound(url: str, bound: int, latency_s: float, per_page: int) -> dict:
    page, regions = page_and_regions(per_page)
    # Enough regions for ~3 s at the ideal rate (and at least 4 full rounds of the bound).
    total = max(4 * bound, int(3 * bound / latency_s), per_page * 2)
    total = min(total, 4096)
    pages = math.ceil(total / per_page)
    threads = max(1, math.ceil(bound / per_page) * 2)  # enough pages in progress to fill the bound
    rec = VllmRecognizer(VllmConfig(base_url=url, max_in_flight=bound, timeout_s=60, retries=0))
    rec.recognize(page, regions[:1])  # warm the pool and the loop
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append((time.perf_counter(), rec.in_flight))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    cpu0, t0 = time.process_time(), time.perf_counter()
    sampler.start()
    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(lambda _: rec.recognize(page, regions), range(pages)))
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    cpu = time.process_time() - cpu0
    errors = sum(1 for r in results for t in r.texts if t.error)
    n = pages * per_page
    # Steady state: drop the first and last latency's worth of samples (ramp up/down).
    steady = [v for ts, v in samples if t0 + latency_s <= ts <= t0 + wall - latency_s] or [v for _, v in samples]
    rec.close()
    return {
        "bound": bound,
        "regions": n,
        "threads": threads,
        "wall_s": round(wall, 3),
        "regions_per_s": round(n / wall, 1),
        "ideal_per_s": round(bound / latency_s, 1),
        "in_flight_mean": round(statistics.mean(steady), 1),
        "in_flight_p50": statistics.median(steady),
        "in_flight_max": max(v for _, v in samples),
        "cpu_ms_per_region": round(cpu * 1000 / n, 3),
        "errors": errors,
        "timeline": samples[:: max(1, len(samples) // 200)],
    }


def encode_cost(per_page: int) -> float:
    """CPU ms per region for crop + PNG + base64 alone (part of the dispatcher's cost)."""
    page, regions = page_and_regions(per_page)
    rec = VllmRecognizer.__new__(VllmRecognizer)
    rec.profile = {"max_image_side": 1536, "image_format": "png"}
    t = time.process_time()
    for _ in range(5):
        for box in regions:
            rec._data_uri(_crop(page, box.bbox, 4))
    return (time.process_time() - t) * 1000 / (5 * len(regions))


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_vllm")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--bounds", default="1,16,64,256")
    parser.add_argument("--regions-per-page", type=int, default=16)
    ns = parser.parse_args(argv)
    bounds = [int(b) for b in ns.bounds.split(",")]
    info = machine()
    info["command"] = " ".join(["python -m bench.gpu_vllm", *argv])
    load_before = loadavg()
    server, url = start_server(ns.latency_ms)
    try:
        rows = [run_bound(url, b, ns.latency_ms / 1000, ns.regions_per_page) for b in bounds]
    finally:
        server.terminate()
        server.wait(timeout=10)
    enc = encode_cost(ns.regions_per_page)
    text = header(
        "vLLM dispatch: in-flight bound, regions/s, dispatcher CPU per region",
        info,
        {
            "server": f"tests.support.openai_server in its own process, fixed {ns.latency_ms:.0f} ms per request",
            "load average": f"{load_before} before, {loadavg()} after",
            "crop+PNG+base64 alone": f"{enc:.3f} ms CPU per region ({ns.regions_per_page} line crops of a scan at A4 width)",
        },
    )
    text += "\n" + table(
        [
            "bound",
            "regions",
            "regions/s",
            "ideal/s",
            "in flight mean (p50)",
            "in flight max",
            "CPU ms/region",
            "of which not image encoding",
            "errors",
        ],
        [
            [
                r["bound"],
                r["regions"],
                r["regions_per_s"],
                r["ideal_per_s"],
                f"{r['in_flight_mean']} ({r['in_flight_p50']})",
                r["in_flight_max"],
                r["cpu_ms_per_region"],
                round(r["cpu_ms_per_region"] - enc, 3),
                r["errors"],
            ]
            for r in rows
        ],
    )
    report(
        "gpu_vllm",
        "vLLM dispatch",
        text,
        {"machine": info, "latency_ms": ns.latency_ms, "runs": rows, "encode_ms_per_region": enc},
    )


if __name__ == "__main__":
    run(sys.argv[1:])
