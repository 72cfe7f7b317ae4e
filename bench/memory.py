"""memory: what the CPU engine path holds, in the embedded CLI and in a long-running worker.

``cli``   peak RSS of ``manage.py ocr`` (the child's own ``ru_maxrss``, read with wait4) on each
          single 300-dpi page and on one TIFF holding those pages cycled to ``--cli-pages`` pages.
          Goals: ≤ 550 MB on a page; the many-page file's peak within 10 % of its largest single
          page's (memory flat with page count).
``soak``  one real Celery worker (prefork, one pool process, the product's app and settings)
          OCRs ``--soak-pages`` single-page jobs of mixed pages, submitted one after another
          through the product's own ``services.submit``; the pool process's RSS is read after each
          page. Goal: RSS after the last page within 15 % of RSS after page 50. A pool process
          replaced on the way (``worker_max_memory_per_child`` tripping) is reported: it would hide
          growth, so the soak runs with the guard as configured and says whether it fired.

The pages are the dev set's born-digital pages rendered at 300 dpi as grayscale scans (multi_page.pdf
and the arXiv table page) plus the two dev TIFF scans: the same kinds of page the issue measured.
Runs on its own PostgreSQL database, Redis db and media folder (bench.stack).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import common, stack

CLI_GOAL_MB = 550
FLAT_GOAL = 1.10
SOAK_GOAL = 1.15
SOAK_BASE_PAGE = 50


def _scans(dpi: int = 300) -> list[tuple[str, object]]:
    """(name, PIL grayscale image) of each distinct page: rendered born-digital pages and the TIFFs."""
    import pymupdf
    from PIL import Image

    out = []
    for name in ("multi_page.pdf", "table_page_2305.03393v1-pg9.pdf"):
        with pymupdf.open(common.DEV / name) as doc:
            for i, page in enumerate(doc):
                pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
                out.append((f"{name} p{i + 1}", Image.frombytes("L", (pix.width, pix.height), pix.samples)))
    for name in ("phototest.tif", "eurotext.tif"):
        with Image.open(common.DEV / name) as img:
            out.append((name, img.convert("L")))
    return out


def _tiff(images: list, path: Path) -> Path:
    images[0].save(path, compression="tiff_lzw", save_all=len(images) > 1, append_images=images[1:], dpi=(300, 300))
    return path


def _cli_peak(path: Path, workdir: Path, environ: dict[str, str]) -> tuple[float, float, int]:
    """(peak RSS MB, CPU-s, exit status) of one ``manage.py ocr`` run on a fresh SQLite database."""
    db = workdir / "cli.sqlite3"
    db.unlink(missing_ok=True)
    env = {**environ, "DATABASE_URL": f"sqlite:///{db}", "OCR_MEDIA_ROOT": str(workdir / "media")}
    cmd = [str(stack.BIN / "python"), "manage.py", "ocr", "--quiet", str(path)]
    proc = subprocess.Popen(cmd, cwd=common.ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"manage.py ocr {path.name} failed: {proc.stderr.read().decode()[-2000:]}")
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, proc.returncode


def cli(args) -> tuple[list[dict], list[list]]:
    pages = [(n, img) for n, img in _scans() if ".pdf p" in n]  # the 300-dpi renders
    environ = dict(os.environ)
    rows, table = [], []
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        work = Path(tmp)
        singles = {name: _tiff([img], work / f"single{i}.tif") for i, (name, img) in enumerate(pages)}
        many = [pages[i % len(pages)][1] for i in range(args.cli_pages)]
        many_path = _tiff(many, work / f"pages{args.cli_pages}.tif")
        peaks: dict[str, list[float]] = {}
        cpu: dict[str, list[float]] = {}
        for _round in range(args.rounds):
            for name, path in [*singles.items(), (f"{args.cli_pages}-page TIFF", many_path)]:
                peak, cpu_s, _ = _cli_peak(path, work, environ)
                peaks.setdefault(name, []).append(peak)
                cpu.setdefault(name, []).append(cpu_s)
        for name in peaks:
            table.append([name, max(peaks[name]), min(peaks[name]), common.median(cpu[name])])
        single_max = max(max(peaks[n]) for n in singles)
        many_peak = max(peaks[f"{args.cli_pages}-page TIFF"])
        text_page = max(peaks[pages[0][0]])
        rows.append(
            {
                "bench": "memory",
                "measure": f"embedded CLI peak RSS MB, one 300-dpi page ({pages[0][0]})",
                "ours": round(text_page),
                "reference": CLI_GOAL_MB,
                "ratio": round(text_page / CLI_GOAL_MB, 2),
                "spread": f"largest single page {single_max:.0f} MB",
                "goal": f"≤ {CLI_GOAL_MB} MB",
                "met": text_page <= CLI_GOAL_MB,
            }
        )
        rows.append(
            {
                "bench": "memory",
                "measure": f"embedded CLI peak RSS MB, {args.cli_pages}-page TIFF vs its largest single page",
                "ours": round(many_peak),
                "reference": round(single_max),
                "ratio": round(many_peak / single_max, 2),
                "spread": f"max over {args.rounds} round(s)",
                "goal": f"ratio ≤ {FLAT_GOAL}",
                "met": many_peak <= single_max * FLAT_GOAL,
            }
        )
    return rows, table


# --- soak: one real worker, many pages -----------------------------------------------------------


def _soak_child(pages: int, out: Path) -> None:
    """In the bench stack's environment: submit single-page jobs one after another and read the
    worker's pool process RSS after each; JSON lines to ``out``."""
    import django
    import psutil

    django.setup()
    from apps.jobs import services
    from apps.jobs.models import Job

    worker_pid = int(os.environ["BENCH_WORKER_PID"])
    docs = []
    for name, img in _scans():
        buf = io.BytesIO()
        img.save(buf, format="TIFF", compression="tiff_lzw", dpi=(300, 300))
        docs.append((name.replace(" ", "_").replace("/", "_") + ".tif", buf.getvalue()))
    with out.open("w") as fh:
        for i in range(pages):
            name, data = docs[i % len(docs)]
            job = services.submit(
                services.Upload(stream=io.BytesIO(data), filename=name, size=len(data)), tenant="bench-soak"
            )
            deadline = time.monotonic() + 600
            while True:
                job.refresh_from_db()
                if job.status in (Job.Status.DONE, Job.Status.FAILED, Job.Status.CANCELLED):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"job {job.pk} ({name}) not finished in 600 s")
                time.sleep(0.2)
            children = psutil.Process(worker_pid).children()
            rss = {c.pid: c.memory_info().rss / 2**20 for c in children}
            cpu = {c.pid: sum(c.cpu_times()[:2]) for c in children}
            fh.write(json.dumps({"page": i + 1, "name": name, "status": job.status, "rss": rss, "cpu": cpu}) + "\n")
            fh.flush()


def soak(args) -> tuple[list[dict], list[list]]:
    stack.prepare_database()
    stack.purge_jobs()
    stack.reset()
    environ = stack.env(OCR_ENGINE_THREADS="1")
    worker = stack.start_worker(1, environ, name="memory-soak")
    try:
        out = stack.LOGS / "memory-soak.jsonl"
        env = {**environ, "BENCH_WORKER_PID": str(worker.proc.pid)}
        cmd = [sys.executable, "-m", "bench.memory", "--soak-child", str(args.soak_pages), str(out)]
        subprocess.run(cmd, cwd=common.ROOT, env=env, check=True)
        recycled = "exceeding memory limit" in worker.log.read_text(errors="replace")
    finally:
        worker.stop()
    samples = [json.loads(line) for line in out.read_text().splitlines()]
    pids = {pid for s in samples for pid in s["rss"]}
    rss = [max(s["rss"].values()) for s in samples]
    failed = sum(s["status"] != "done" for s in samples)
    base = rss[min(SOAK_BASE_PAGE, len(rss)) - 1]
    last = rss[-1]
    table = [
        [s["page"], s["name"], round(max(s["rss"].values()))] for s in samples if s["page"] % 25 == 0 or s["page"] <= 10
    ]
    rows = [
        {
            "bench": "memory",
            "measure": f"worker pool process RSS MB after {len(rss)} mixed pages vs after page {SOAK_BASE_PAGE}",
            "ours": round(last),
            "reference": round(base),
            "ratio": round(last / base, 2),
            "spread": f"min–max after page {SOAK_BASE_PAGE}: {min(rss[SOAK_BASE_PAGE - 1 :]):.0f}–"
            f"{max(rss[SOAK_BASE_PAGE - 1 :]):.0f} MB; pool processes seen: {len(pids)}"
            + ("; replaced by the memory guard" if recycled else "")
            + (f"; {failed} page(s) not done" if failed else ""),
            "goal": f"ratio ≤ {SOAK_GOAL}, one pool process, every page done",
            "met": last <= base * SOAK_GOAL and len(pids) == 1 and not failed,
        }
    ]
    return rows, table


PART_OF_MEASURE = {"embedded CLI": "cli", "worker pool process": "soak"}


def _carried_rows(parts: set[str]) -> list[dict]:
    """Rows of the parts this run leaves out, from today's earlier ``memory`` run (the soak alone
    takes most of an hour, so the parts are often run apart), each marked with when it ran."""
    import datetime as dt

    earlier = common.RESULTS / "runs" / dt.datetime.now(dt.UTC).strftime("%Y-%m-%d") / "memory.json"
    if not earlier.exists():
        return []
    record = json.loads(earlier.read_text())
    out = []
    for row in record.get("rows", []):
        part = next((p for prefix, p in PART_OF_MEASURE.items() if row.get("measure", "").startswith(prefix)), "")
        if part and part not in parts:
            when = f"run {record.get('started', '?')}, commit {str(record.get('commit', '?'))[:12]}"
            out.append({**row, "spread": f"{row.get('spread', '')} ({when})".strip()})
    return out


def run(argv: list[str]) -> list[dict]:
    parser = argparse.ArgumentParser(prog="bench memory")
    parser.add_argument("--parts", default="cli,soak", help="comma-separated: cli, soak")
    parser.add_argument("--rounds", type=int, default=2, help="CLI runs per file (peak is the max)")
    parser.add_argument("--cli-pages", type=int, default=12)
    parser.add_argument("--soak-pages", type=int, default=1000)
    parser.add_argument("--soak-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.soak_child:
        _soak_child(int(args.soak_child[0]), Path(args.soak_child[1]))
        return []
    info = common.machine()
    load_before = common.loadavg()
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    rows: list[dict] = []
    md_parts = []
    if "cli" in parts:
        cli_rows, table = cli(args)
        rows += cli_rows
        md_parts.append(
            "Embedded CLI (`manage.py ocr --quiet FILE`, fresh SQLite each run):\n\n"
            + common.table(["file", "peak RSS MB (max)", "peak RSS MB (min)", "CPU-s (median)"], table)
        )
    if "soak" in parts:
        soak_rows, table = soak(args)
        rows += soak_rows
        md_parts.append(
            "Worker soak (one prefork pool process, RSS after the page):\n\n"
            + common.table(["page", "document", "pool process RSS MB"], table)
        )
    carried = _carried_rows(parts)
    rows += carried
    extra = {
        "load average (before / after)": f"{load_before} / {common.loadavg()}",
        "settings": f"OCR_CPU_PROFILE={os.environ.get('OCR_CPU_PROFILE', 'default')}, "
        f"OCR_CPU_RUNTIME={os.environ.get('OCR_CPU_RUNTIME', 'default')}",
        "peak RSS": "ru_maxrss of the CLI process (wait4); the worker's pool process RSS from /proc (psutil)",
    }
    md = common.header("memory — embedded CLI peak by page count, worker RSS over many pages", info, extra)
    md += "\n" + common.table(
        ["measure", "ours", "reference", "ratio", "goal", "met"],
        [
            [r["measure"], r["ours"], r["reference"], r["ratio"], r["goal"], "met" if r["met"] else "NOT met"]
            for r in rows
        ],
    )
    md += "\n\n" + "\n\n".join(md_parts) + "\n"
    common.report("memory", "memory", md, {"machine": info, "rows": rows})
    return rows


if __name__ == "__main__":
    run(sys.argv[1:])
