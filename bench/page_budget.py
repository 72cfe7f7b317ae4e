"""page-budget: what reading PDF pages inside the budgeted child (workers/budget.py) costs, and
what a poison page costs before it is stopped.

Ordinary documents: ingest's page reading (text layer where there is one, else the page rendered
for OCR) in this process (the reference: what ingest did before the budget) against the same work
through ``budget.read_pdf_pages`` (fork, rlimits, pickling back). CPU seconds of this process and
its children together (getrusage), so the child's work is counted; rounds alternate A/B so load
from elsewhere hits both. Poison pages (tests/hostile/corpus.inflating_text_pdf): CPU seconds and
the child's peak RSS until the budget stops it, with the settings' default budget.
Goal: ≤ 1.25× the in-process CPU on documents of real work; poison stopped with input:too-complex.

Orientation check (``--orientation``, on by default): a scanned document read through the child
with the check's reader as a worker now passes it (models loaded before the fork, shared) against
a fresh reader whose models load inside each child (what every job's child did before
2026-12-05), alternating; CPU of this process and its children.
"""

from __future__ import annotations

import argparse
import resource

import pymupdf

from bench import common
from bench.engines import django_settings
from tests.hostile.corpus import inflating_text_pdf
from workers.engines import textlayer

FILES = ("multi_page.pdf", "code_and_formula.pdf", "table_nics-background-checks-2015-11.pdf", "scanned_ocr_test.pdf")


def _budget_module():
    """workers.budget, imported once Django's apps are loaded (it reads the job models for its
    attempt counters; the page reader measured here touches no database)."""
    import django

    django.setup()
    from workers import budget

    return budget


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run(argv: list[str]) -> list[dict]:
    parser = argparse.ArgumentParser(prog="bench page-budget")
    parser.add_argument("--rounds", type=int, default=5, help="A/B rounds per document (median)")
    parser.add_argument("--files", default=",".join(FILES))
    parser.add_argument(
        "--orientation", default="scanned_ocr_test.pdf", help="scanned PDF for the check's rows ('' skips)"
    )
    args = parser.parse_args(argv)
    s = django_settings()
    budget = _budget_module()
    request = budget.PageRequest(
        dpi=s.OCR_DPI,
        max_pixels=s.OCR_MAX_IMAGE_PIXELS,
        min_chars=s.OCR_TEXT_LAYER_MIN_CHARS,
        force_ocr=False,
        text_layer=textlayer.TextLayerConfig(min_chars=s.OCR_TEXT_LAYER_MIN_CHARS),
    )
    limits = budget.PageBudget(
        cpu_s=s.OCR_PAGE_CPU_SECONDS,
        memory_bytes=s.OCR_PAGE_MEMORY_MB << 20,
        max_chars=s.OCR_PAGE_MAX_CHARS,
        wall_s=s.OCR_PAGE_WALL_SECONDS,
    )
    info = common.machine()
    load_before = common.loadavg()

    def in_process(data: bytes, pages: list[int]) -> None:
        sink: list = []
        budget._read_pages(data, pages, request, limits, sink.append)

    def in_child(data: bytes, pages: list[int]) -> None:
        list(budget.read_pdf_pages(data, pages, request, limits))

    rows = []
    for name in [f.strip() for f in args.files.split(",") if f.strip()]:
        data = (common.DEV / name).read_bytes()
        pages = list(range(pymupdf.open(stream=data, filetype="pdf").page_count))
        in_process(data, pages)  # warm-up: first-call allocations are not per-document costs
        times: dict[str, list[float]] = {"in-process": [], "child": []}
        for _ in range(args.rounds):
            for label, fn in (("in-process", in_process), ("child", in_child)):
                before = _cpu()
                fn(data, pages)
                times[label].append(_cpu() - before)
        ref, ours = common.median(times["in-process"]), common.median(times["child"])
        rows.append({"file": name, "pages": len(pages), "ref": ref, "ours": ours, "ratio": ours / ref, **times})

    checked = _orientation_rows(budget, request, limits, args.orientation, args.rounds) if args.orientation else []

    poison = []
    for mb in (15, 64):
        data = inflating_text_pdf(mb)
        before, peak_before = _cpu(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        try:
            list(budget.read_pdf_pages(data, [0], request, limits))
            outcome = "read (not stopped)"
        except budget.InputError as exc:
            outcome = f"{exc.code}: {exc.message}"
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        poison.append(
            {
                "file": f"{mb} MB stream ({len(data) // 1024} KB file)",
                "cpu_s": _cpu() - before,
                "peak_mb": max(peak, peak_before) / 1024,
                "outcome": outcome,
            }
        )

    real_work = [r for r in rows if r["ref"] >= 0.2]
    worst = max((r["ratio"] for r in real_work), default=1.0)
    stopped = all("too-complex" in p["outcome"] for p in poison)
    extra = {
        "load average (before / after)": f"{load_before} / {common.loadavg()}",
        "budget": f"{limits.cpu_s} CPU-s, {s.OCR_PAGE_MEMORY_MB} MB, {limits.max_chars} chars per page",
        "rounds": f"{args.rounds}, alternating in-process / child; CPU of this process + children",
    }
    md = common.header("page-budget — page reading in a budgeted child vs in process", info, extra)
    md += "\n" + common.table(
        ["document", "pages", "in process CPU-s", "budgeted child CPU-s", "ratio ×"],
        [[r["file"], r["pages"], r["ref"], r["ours"], r["ratio"]] for r in rows],
    )
    md += "\n\n" + common.table(
        ["poison page", "CPU-s until stopped", "peak RSS of children MB", "outcome"],
        [[p["file"], p["cpu_s"], p["peak_mb"], p["outcome"]] for p in poison],
    )
    if checked:
        md += "\n\n" + common.table(
            [
                "scanned document, orientation checked",
                "pages",
                "models loaded in each child CPU-s",
                "loaded before the fork CPU-s",
                "ratio ×",
            ],
            [[r["file"], r["pages"], r["ref"], r["ours"], r["ratio"]] for r in checked],
        )
    md += (
        f"\n\nWorst ratio on documents with ≥ 0.2 CPU-s of work: × {worst:.2f} (goal ≤ 1.25: "
        f"{'MET' if worst <= 1.25 else 'NOT MET'}); poison stopped: {'MET' if stopped else 'NOT MET'}.\n"
    )
    common.report(
        "page-budget", "page-budget", md, {"machine": info, "rows": rows, "poison": poison, "orientation": checked}
    )
    return (
        [
            _ratio_row(
                f"CPU-s per document, {r['file']}",
                r,
                "≤ 1.25× where ≥ 0.2 CPU-s" if r["ref"] >= 0.2 else "(fork cost only)",
                (r["ratio"] <= 1.25) if r["ref"] >= 0.2 else None,
                spread=f"{min(r['child']):.3f}–{common.median(r['child']):.3f}–{max(r['child']):.3f}",
            )
            for r in rows
        ]
        + [
            {
                "bench": "page-budget",
                "measure": f"poison {p['file']}: CPU-s until stopped",
                "ours": round(p["cpu_s"], 1),
                "reference": "unbounded",
                "goal": "input:too-complex",
                "met": "too-complex" in p["outcome"],
                "detail": True,
            }
            for p in poison
        ]
        + [
            _ratio_row(
                f"CPU-s per document with the orientation check, {r['file']}: models loaded before the fork vs in each child",
                r,
                "< 1",
                r["ratio"] < 1,
            )
            for r in checked
        ]
    )


def _ratio_row(measure: str, r: dict, goal: str, met: bool | None, spread: str | None = None) -> dict:
    """One summary row of a measured pair (``r``: ours, ref and their ratio)."""
    row = {
        "bench": "page-budget",
        "measure": measure,
        "ours": round(r["ours"], 3),
        "reference": round(r["ref"], 3),
        "ratio": round(r["ratio"], 2),
        "goal": goal,
        "met": met,
        "detail": True,
    }
    if spread is not None:
        row["spread"] = spread
    return row


def _orientation_rows(budget, request, limits, name: str, rounds: int) -> list[dict]:
    """CPU-s per scanned document through the child: the check's models loaded in this process
    before the fork (a worker's ingest, ``workers.ingest._orientation_reader``) against a fresh
    reader whose models load in the child, alternating."""
    import dataclasses

    from workers.engines.cpu.orientation import OrientationReader

    data = (common.DEV / name).read_bytes()
    pages = list(range(pymupdf.open(stream=data, filetype="pdf").page_count))
    loaded = OrientationReader()
    loaded.load()

    def read(reader) -> float:
        before = _cpu()
        list(budget.read_pdf_pages(data, pages, dataclasses.replace(request, reader=reader), limits))
        return _cpu() - before

    read(loaded)  # warm-up
    times: dict[str, list[float]] = {"in each child": [], "before the fork": []}
    for _ in range(rounds):
        times["in each child"].append(read(OrientationReader()))
        times["before the fork"].append(read(loaded))
    ref, ours = common.median(times["in each child"]), common.median(times["before the fork"])
    return [{"file": name, "pages": len(pages), "ref": ref, "ours": ours, "ratio": ours / ref, **times}]
