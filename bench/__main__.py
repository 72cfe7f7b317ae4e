"""``python -m bench [NAME [ARGS...]]``: one benchmark with its own arguments, or all in turn."""

from __future__ import annotations

import importlib
import os
import sys
import time

# name → (module, function, what it measures)
BENCHMARKS = {
    "p2": ("bench.p2", "compare", "CPU engine vs Tesseract 5: s/page and word F1"),
    "p3": ("bench.p3", "run", "text-layer fast path vs OCR path, per page"),
    "p1": ("bench.p1", "run", "pages/s through REST + Celery + Redis vs direct engine calls"),
    "p4": ("bench.p4", "run", "ingest: 64 concurrent 1 MB uploads vs a minimal Starlette endpoint"),
    "tables": ("bench.tables_teds", "run", "TEDS of the dev table pages, born-digital and rasterised"),
    "p2tune": ("bench.p2", "tune", "CPU recognizer knobs one at a time (not part of the default run)"),
}
DEFAULT = ("p2", "p3", "p1", "p4", "tables")


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ocrsite.settings")
    if argv and argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        for name, (_m, _f, what) in BENCHMARKS.items():
            print(f"  {name:7s} {what}")
        return 0
    if argv and argv[0] not in BENCHMARKS:
        print(f"unknown benchmark {argv[0]!r}; one of: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    runs = [(argv[0], argv[1:])] if argv else [(name, []) for name in DEFAULT]
    for name, args in runs:
        module, func, _what = BENCHMARKS[name]
        t0 = time.perf_counter()
        getattr(importlib.import_module(module), func)(args)
        print(f"\n({name} took {time.perf_counter() - t0:.0f} s)\n", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
