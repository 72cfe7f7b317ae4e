"""Big documents through the stack: a 2,000-page born-digital PDF and a 300-page scanned PDF.

Both are made from the dev set (multi_page.pdf repeated; scanned_ocr_test.pdf repeated) into a
temporary folder, never committed. Each goes through gunicorn + one worker per queue (ingest on
``cpu``, ``layout``, ``ocr``; one prefork child each), submitted by the Python client, which sends
them straight to storage (the direct-upload path) since both are above its threshold. The
workers are started afresh per document, so each one's peak RSS (VmHWM of its processes) belongs
to that document.

Reported: peak RSS of ingest and of each worker, time to the first page done, when ingest stored
its last page (the old ingest sent no page on before that), wall time and pages/s. A side
measurement replays ingest's rendering in two fresh processes, from the whole file's bytes (the
old ingest: ``data = fh.read()``) and from its path (now), and reports each one's peak RSS.

``make bench BENCH_ARGS="bigdocs [--born N] [--scanned N]"``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import pymupdf

from bench import stack
from bench.common import ROOT, header, loadavg, machine, report, table

DEV = ROOT.parent / "shared" / "data" / "dev"


def _dev(name: str) -> Path:
    for folder in (DEV, ROOT / "tests" / "data", Path("/work/shared/data/dev")):
        if (folder / name).exists():
            return folder / name
    raise FileNotFoundError(name)


def make_pdf(source: Path, pages: int, out: Path) -> Path:
    doc = pymupdf.open()
    with pymupdf.open(source) as src:
        while doc.page_count < pages:
            doc.insert_pdf(src, to_page=min(src.page_count, pages - doc.page_count) - 1)
    doc.save(out, garbage=0)
    doc.close()
    return out


def _peak_rss_mib(proc: psutil.Process) -> dict[str, float]:
    """VmHWM (peak resident set) of a worker's main process and its busiest child, in MiB."""

    def hwm(p: psutil.Process) -> float:
        try:
            for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    children = proc.children(recursive=True)
    return {"main": round(hwm(proc), 1), "child": round(max((hwm(c) for c in children), default=0.0), 1)}


def api_key() -> str:
    """An API key for a bench tenant (what the Python client sends)."""
    script = (
        "from apps.api.models import TenantAPIKey; "
        "print(TenantAPIKey.objects.create_key(name='bigdocs', tenant='bench')[1])"
    )
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env=stack.env(),
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip().splitlines()[-1]


def through_stack(path: Path, key: str, port: int, poll: float) -> dict:
    from ocrclient import Client

    environ = stack.env(OCR_MAX_PAGES="5000")
    workers = {q: stack.start_worker(1, environ, name=f"bigdocs-{q}", queues=q) for q in ("cpu", "layout", "ocr")}
    try:
        api = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Api-Key {key}"}, timeout=120
        )
        with Client(f"http://127.0.0.1:{port}", api_key=key, timeout=600) as client:
            t0 = time.monotonic()
            job = client.submit(path)
            submitted = time.monotonic() - t0
            first_done = ingest_done = None
            while True:
                try:
                    body = api.get(f"/api/v1/jobs/{job.id}/result", params={"partial": 1, "format": "json"}).json()
                except httpx.TransportError:  # a web worker recycled under load: ask again
                    time.sleep(poll)
                    continue
                now = time.monotonic() - t0
                if "partial" in body:
                    if first_done is None and body["pages_done"] >= 1:
                        first_done = now
                    if ingest_done is None and body["pages_stored"] >= body["pages_total"]:
                        ingest_done = now
                    time.sleep(poll)
                    continue
                break
            final = client.get(job.id)
            wall = time.monotonic() - t0
        peaks = {q: _peak_rss_mib(psutil.Process(w.proc.pid)) for q, w in workers.items()}
    finally:
        for w in workers.values():
            w.stop()
    pages = final.progress.pages_total
    return {
        "status": final.status,
        "pages": pages,
        "bytes": path.stat().st_size,
        "upload_s": round(submitted, 1),
        "first_page_s": round(first_done or wall, 1),
        "ingest_done_s": round(ingest_done or wall, 1),
        "wall_s": round(wall, 1),
        "pages_per_s": round(pages / wall, 2) if wall else 0.0,
        "peak_rss_mib": peaks,
    }


_REPLAY = """
import sys, pymupdf, io, numpy as np
from PIL import Image
path, mode, dpi = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "bytes":
    data = open(path, "rb").read()
    doc = pymupdf.open(stream=data, filetype="pdf")
else:
    doc = pymupdf.open(path, filetype="pdf")
for page in doc:
    pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csRGB, alpha=False)
    img = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, pix.n)
    buf = io.BytesIO(); Image.fromarray(img).save(buf, format="PNG", compress_level=1)
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        print(int(line.split()[1]) / 1024)
"""


def replay_peak(path: Path, mode: str, dpi: int = 200) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _REPLAY, str(path), mode, str(dpi)], capture_output=True, text=True, check=True
    )
    return round(float(out.stdout.strip()), 1)


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bigdocs")
    parser.add_argument("--born", type=int, default=2000, help="pages of the born-digital PDF")
    parser.add_argument("--scanned", type=int, default=300, help="pages of the scanned PDF")
    parser.add_argument("--poll", type=float, default=2.0)
    args = parser.parse_args(argv)
    info = machine()
    load_before = loadavg()
    stack.reset()
    stack.prepare_database()
    key = api_key()
    port = stack.free_port()
    web = stack.start_web(stack.procfile_web(port), port, environ=stack.env(WEB_WORKERS="2"))
    results = {}
    replays = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bigdocs-") as tmp:
            wanted = {
                f"born-digital {args.born} p": ("multi_page.pdf", args.born, "born.pdf"),
                f"scanned {args.scanned} p": ("scanned_ocr_test.pdf", args.scanned, "scan.pdf"),
            }
            docs = {
                label: make_pdf(_dev(source), pages, Path(tmp) / name)
                for label, (source, pages, name) in wanted.items()
                if pages > 0  # 0: skip that document
            }
            for label, path in docs.items():
                stack.purge_jobs()
                results[label] = through_stack(path, key, port, args.poll)
                print(label, json.dumps(results[label]), file=sys.stderr, flush=True)
            # A/B/A/B: the old ingest's whole-bytes rendering vs the path, alternated, fresh processes.
            if scan := docs.get(f"scanned {args.scanned} p"):
                rounds = [(mode, replay_peak(scan, mode)) for mode in ("bytes", "path", "bytes", "path")]
                for mode in ("bytes", "path"):
                    replays[mode] = max(v for m, v in rounds if m == mode)
    finally:
        web.stop()
    rows = [
        [
            label,
            r["status"],
            r["pages"],
            f"{r['bytes'] / 2**20:.1f}",
            r["upload_s"],
            r["first_page_s"],
            r["ingest_done_s"],
            r["wall_s"],
            r["pages_per_s"],
            r["peak_rss_mib"]["cpu"]["child"],
            r["peak_rss_mib"]["layout"]["child"],
            r["peak_rss_mib"]["ocr"]["child"],
        ]
        for label, r in results.items()
    ]
    text = header(
        "bigdocs: big documents through the stack (direct upload, streaming ingest)",
        info,
        {"load average (before, after)": f"{load_before}; {loadavg()}"},
    )
    text += "\n" + table(
        [
            "document",
            "status",
            "pages",
            "MiB",
            "upload s",
            "first page done s",
            "ingest stored last page s",
            "wall s",
            "pages/s",
            "peak RSS ingest MiB",
            "peak RSS layout MiB",
            "peak RSS ocr MiB",
        ],
        rows,
    )
    text += (
        "\n\nIngest's rendering replayed on the scanned PDF (fresh process each, A/B/A/B, max of two): "
        f"from the whole file's bytes (the old ingest) peak RSS {replays.get('bytes')} MiB; "
        f"from its path (now) {replays.get('path')} MiB.\n"
    )
    report("bigdocs", "big documents", text, {"results": results, "replay_peak_rss_mib": replays})
