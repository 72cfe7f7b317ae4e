"""``python -m bench [NAME [ARGS...]]``: one benchmark with its own arguments, or all in turn;
either way the day's report (bench/results/report-YYYY-MM-DD.md) is rewritten with the results.

``python -m bench report [YYYY-MM-DD]``  rebuild a day's report from its recorded runs
``python -m bench readme [REPORT]``      copy the newest (or given) report's summary into README.md
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
import sys
from pathlib import Path

# name → (module, function, what it measures)
BENCHMARKS = {
    "cpu-engine": ("bench.cpu_engine", "compare", "CPU engine, both profiles, vs Tesseract: CPU-s/page, F1"),
    "cli": ("bench.cli", "run", "embedded CLI whole process: blank page, 4-page TIFF vs the tesseract command"),
    "memory": ("bench.memory", "run", "embedded CLI peak by page count; a worker's RSS over many pages"),
    "text-layer": ("bench.text_layer", "run", "text-layer fast path vs OCR path, per page"),
    "pipeline": ("bench.pipeline", "run", "pages/s through REST + Celery + Redis vs direct engine calls"),
    "ingest": ("bench.ingest", "run", "ingest: 64 concurrent 1 MB uploads, product vs a framework-free reference"),
    "tables": ("bench.tables_teds", "run", "TEDS of the dev table pages, born-digital and rasterised"),
    "orientation": (
        "bench.orientation",
        "run",
        "orientation check by reading: CPU-s per page vs the page's OCR, turns found",
    ),
    "script": (
        "bench.script_routing",
        "run",
        "script by reading and large pages in bands: F1 and CPU-s, before vs now",
    ),
    "page-budget": (
        "bench.page_budget",
        "run",
        "PDF page reading in ingest's budgeted child vs in process; poison pages",
    ),
    "bigdocs": ("bench.bigdocs", "run", "2,000-page born-digital and 300-page scanned PDFs: RSS, first page, pages/s"),
    "bulk-lane": ("bench.bulk_lane", "run", "online latency with and without a batch on the bulk lane (goal ≤ 1.5x)"),
    "cost": ("bench.cost", "run", "worker CPU-s per page and $ per 1,000 pages; the VLM stage's GPU figure on paper"),
    "tenancy": (
        "bench.tenancy",
        "run",
        "another tenant's delay under each bomb of issue 35; the door's answer time; gunicorn workers killed",
    ),
    "cpu-knobs": ("bench.cpu_engine", "tune", "CPU recognizer knobs one at a time (not part of the default run)"),
}
DEFAULT = (
    "cpu-engine",
    "cli",
    "memory",
    "text-layer",
    "pipeline",
    "ingest",
    "tables",
    "orientation",
    "tenancy",
    "script",
)


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ocrsite.settings")
    from bench import report

    if argv and argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        for name, (_m, _f, what) in BENCHMARKS.items():
            print(f"  {name:7s} {what}")
        return 0
    if argv and argv[0] == "report":
        date = argv[1] if len(argv) > 1 else dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
        print(report.write(date))
        return 0
    if argv and argv[0] == "readme":
        print(report.update_readme(Path(argv[1]) if len(argv) > 1 else None))
        return 0
    if argv and argv[0] not in BENCHMARKS:
        print(f"unknown benchmark {argv[0]!r}; one of: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    runs = [(argv[0], argv[1:])] if argv else [(name, []) for name in DEFAULT]
    failed = []
    for name, args in runs:
        module, func, _what = BENCHMARKS[name]
        record = report.run_one(
            name, lambda a, m=module, f=func: getattr(importlib.import_module(m), f)(a), args, whole=not argv
        )
        print(f"\n({name} took {record['seconds']} s)\n", file=sys.stderr, flush=True)
        if record["error"]:
            failed.append(name)
        path = report.write(record["started"][:10])
    print(f"report: {path}", file=sys.stderr)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
