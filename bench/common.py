"""Shared pieces of the benchmarks: machine facts, the dev corpus with its ground truth, word F1,
timing helpers, and one way to print a table and keep its JSON.

Everything measured here runs on the real dev documents in ../shared/data/dev; nothing is
generated. Benchmarks on this box share two cores with whatever else runs, so each table carries
the load average seen while it was measured.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil

from workers.engines.cpu import this_cpu_flags

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DEV = Path(os.environ.get("OCR_DEV_DATA", str(ROOT.parent / "shared" / "data" / "dev")))

# scanned_ocr_test.pdf ships without ground truth ("read it"); this is its one paragraph, read by
# eye from the page at 110 dpi. Nothing else is on the page.
SCANNED_OCR_TEST_TEXT = "Docling bundles PDF document conversion to JSON and Markdown in an easy self contained package"


# --- machine and run facts ---------------------------------------------------------------------


def machine() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor()
    flags = this_cpu_flags()
    # The vector extensions decide which CPU runtime is cheaper (workers.engines.cpu.auto_runtime),
    # and one model name ("AMD EPYC") covers machines with and without AVX-512.
    vector = "+".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16") if f in flags)
    cpu = f"{cpu}; {vector}" if vector else cpu
    ram_gib = 0.0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram_gib = int(line.split()[1]) / 1024 / 1024
                break
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "ram_gib": round(ram_gib, 1),
        "python": platform.python_version(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "make bench BENCH_ARGS=" + shlex.quote(" ".join(sys.argv[1:])) if sys.argv[1:] else "make bench",
    }


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# --- word F1 -----------------------------------------------------------------------------------


def word_f1(predicted: str, truth: str) -> float:
    """The project's word F1, the one the tests' thresholds use, so bench and tests agree."""
    from bench.accuracy import word_f1 as project_f1

    return float(project_f1(predicted, truth))


def f1_source() -> str:
    return "bench.accuracy.word_f1 (bag of words, NFKC, lower case, edge punctuation trimmed)"


# --- the corpus --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TruthPage:
    """One page image with the text a perfect reader would get from it."""

    name: str
    kind: str  # "scan" or "born-digital"
    image: np.ndarray  # RGB
    dpi: int
    truth: str
    group: str = ""  # real pages: "table", "small print" or "text" (bench/data/real/README.md)


def _rgb(path: Path) -> tuple[np.ndarray, int]:
    from PIL import Image

    with Image.open(path) as img:
        dpi = int(round(float(img.info.get("dpi", (300, 300))[0] or 300)))
        return np.asarray(img.convert("RGB")), dpi


def render(pdf: Path, index: int, dpi: int) -> np.ndarray:
    import pymupdf

    with pymupdf.open(pdf) as doc:
        pix = doc[index].get_pixmap(dpi=dpi, colorspace=pymupdf.csRGB, alpha=False)
        return np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, pix.n).copy()


def text_layer(pdf: Path, index: int) -> str:
    import pymupdf

    with pymupdf.open(pdf) as doc:
        return " ".join(w[4] for w in doc[index].get_text("words"))


def scan_pages(dpi: int = 200) -> list[TruthPage]:
    """The dev scans: two TIFFs with human ground truth and the scanned PDF rendered at ``dpi``."""
    photo, photo_dpi = _rgb(DEV / "phototest.tif")
    euro, euro_dpi = _rgb(DEV / "eurotext.tif")
    return [
        TruthPage("phototest.tif", "scan", photo, photo_dpi, (DEV / "phototest.gold.txt").read_text()),
        TruthPage("eurotext.tif", "scan", euro, euro_dpi, (DEV / "eurotext.txt").read_text()),
        TruthPage(
            "scanned_ocr_test.pdf p1", "scan", render(DEV / "scanned_ocr_test.pdf", 0, dpi), dpi, SCANNED_OCR_TEST_TEXT
        ),
    ]


def born_digital_pages(dpi: int = 200, files: Sequence[str] = ("multi_page.pdf",)) -> list[TruthPage]:
    """Born-digital pages rasterised at ``dpi``; their own text layer is the ground truth."""
    import pymupdf

    out = []
    for name in files:
        with pymupdf.open(DEV / name) as doc:
            count = len(doc)
        for i in range(count):
            out.append(
                TruthPage(
                    f"{name} p{i + 1}", "born-digital", render(DEV / name, i, dpi), dpi, text_layer(DEV / name, i)
                )
            )
    return out


# Public pages outside the dev set (bench/data/real/README.md: sources, commits, licences), read from
# the evaluation corpus (bench/corpus/files) where it holds the file, else from bench/data/real: the
# page index in each file and its group. "table": the page holds a table (pdfplumber's
# find_tables or a table by eye); "small print": body text of 6-8 pt; "text": the rest.
REAL = ROOT / "bench" / "data" / "real"
CORPUS_FILES = ROOT / "bench" / "corpus" / "files"
REAL_PAGES: tuple[tuple[str, int, str], ...] = (
    ("federal-register-2020-17221.pdf", 0, "text"),
    ("federal-register-2020-17221.pdf", 1, "text"),
    ("WARN-Report-for-7-1-2015-to-03-25-2016.pdf", 0, "table"),
    ("la-precinct-bulletin-2014-p1.pdf", 0, "table"),
    ("issue-90-example.pdf", 0, "small print"),
    ("issue-140-example.pdf", 0, "small print"),
    ("pr-138-example.pdf", 0, "table"),
    ("issue-192-example.pdf", 0, "table"),
    ("table-curves-example.pdf", 0, "table"),
    ("issue-466-example.pdf", 0, "table"),
    ("issue-53-example.pdf", 0, "table"),
    ("issue-461-example.pdf", 0, "table"),
    ("issue-33-lorem-ipsum.pdf", 0, "table"),
    ("150109DSP-Milw-505-90D.pdf", 0, "text"),
    ("issue-13-151201DSP-Fond-581-90D.pdf", 0, "text"),
    ("scotus-transcript-p1.pdf", 0, "text"),
    ("2023-06-20-PV.pdf", 0, "text"),
    ("cupertino_usd_4-6-16.pdf", 0, "text"),
    ("issue-982-example.pdf", 0, "text"),
    ("issue-598-example.pdf", 0, "text"),
    ("unlv-8071_093.3B.tif", 0, "text"),
    ("unlv-8087_054.3B.tif", 0, "text"),
)


def real_path(name: str) -> Path:
    """A real page's file: the corpus's copy (pdfplumber's PDFs, tesseract-test's UNLV scans named
    ``unlv-…`` here) when it has one, else bench/data/real's."""
    corpus = CORPUS_FILES / "tesseract-test" / name.removeprefix("unlv-") if name.startswith("unlv-") else None
    corpus = corpus or CORPUS_FILES / "pdfplumber" / name
    return corpus if corpus.exists() else REAL / name


def real_pages(dpi: int = 200, only: set[str] | None = None) -> list[TruthPage]:
    """The real-pages set: born-digital pages rasterised at ``dpi`` (their text layer the truth) and
    two UNLV scans with their ground truth, each with its group."""
    out = []
    for name, index, group in REAL_PAGES:
        label = f"{name} p{index + 1}"
        if only is not None and label not in only:
            continue
        path = real_path(name)
        if path.suffix == ".tif":
            image, scan_dpi = _rgb(path)
            truth = path.with_suffix(".txt").read_text(encoding="utf-8", errors="replace")
            out.append(TruthPage(label, "scan", image, scan_dpi, truth, group))
        else:
            out.append(TruthPage(label, "born-digital", render(path, index, dpi), dpi, text_layer(path, index), group))
    return out


# --- timing and output -------------------------------------------------------------------------


def tree_cpu_seconds(pid: int) -> float:
    """CPU-seconds (user + system) a process and its descendants have spent: the live ones' own,
    and what each has counted for the children it has already waited for (a Celery pool's
    processes, a budgeted page reader, PostgreSQL's backends). 0.0 when the process is gone."""
    try:
        root = psutil.Process(pid)
        family = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    total = 0.0
    for proc in family:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    import time

    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def header(title: str, info: dict, extra: dict | None = None) -> str:
    facts = {
        "machine": f"{info['nproc']} CPU ({info['cpu']}), {info['ram_gib']} GiB RAM, Python {info['python']}",
        "date": info["date"],
        "command": f"`{info['command']}`",
        **(extra or {}),
    }
    return f"### {title}\n\n" + "\n".join(f"- {k}: {v}" for k, v in facts.items()) + "\n"


def report(name: str, title: str, text: str, data: dict) -> Path:
    """Print the Markdown and keep the JSON (bench/results/ is git-ignored)."""
    print(text, flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    path = RESULTS / f"{name}-{stamp}.json"
    path.write_text(json.dumps({"title": title, "markdown": text, **data}, indent=2, default=str))
    (RESULTS / f"{name}-latest.md").write_text(text + "\n")
    return path
