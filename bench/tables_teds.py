"""Tables: TEDS of every dev table page against its ground truth (bench/tables/*.html), on the
born-digital text layer and on the page rasterised at 200 dpi through the CPU layout + OCR
engines. TEDS and structure-only TEDS (cell texts ignored); target ≥ 0.90 each."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pymupdf

from bench import common
from bench.accuracy import teds
from bench.engines import django_settings
from workers.content import tables
from workers.engines import textlayer
from workers.engines.cpu import RapidLayoutEngine, RapidOcrRecognizer

TRUTH = Path(__file__).resolve().parent / "tables"
PAGES = ("table_page_2305.03393v1-pg9.pdf", "table_nics-background-checks-2015-11.pdf")


def born_digital(path: Path) -> tables.Table | None:
    page = pymupdf.open(path)[0]
    found = [t for b, t in textlayer.extract(page, 200, textlayer.TextLayerConfig()) if b.label == "table" and t.table]
    return tables.from_dict(found[0].table) if found else None


def rasterised(path: Path, layout, recognizer, dpi: int) -> tables.Table | None:
    page = pymupdf.open(path)[0]
    pix = page.get_pixmap(dpi=dpi)
    image = np.frombuffer(pix.samples, np.uint8).reshape(pix.h, pix.w, pix.n)[:, :, :3].copy()
    boxes = layout.detect([image])[0]
    result = recognizer.recognize(image, boxes)
    found = [(b, t) for b, t in zip(boxes, result.texts, strict=True) if b.label == "table" and t.table]
    if not found:
        return None
    _, text = max(found, key=lambda bt: (bt[0].bbox[2] - bt[0].bbox[0]) * (bt[0].bbox[3] - bt[0].bbox[1]))
    return tables.from_dict(text.table)


def run(argv: list[str]) -> list[dict]:
    parser = argparse.ArgumentParser(prog="bench tables")
    parser.add_argument("--dpi", type=int, default=200)
    parser.add_argument("--no-raster", action="store_true", help="born-digital only (seconds, not minutes)")
    args = parser.parse_args(argv)
    info = common.machine()
    load_before = common.loadavg()
    layout = recognizer = None
    if not args.no_raster:
        # The engines as a worker builds them (the deployment's profile, OCR_CPU_PROFILE).
        django_settings()
        from workers import engine_setup
        from workers.engines.cpu.settings import layout_from_settings, recognizer_from_settings

        deployment = engine_setup.deployment().settings
        layout = RapidLayoutEngine(layout_from_settings(deployment))
        recognizer = RapidOcrRecognizer(recognizer_from_settings(deployment))
    rows = []
    for name in PAGES:
        truth = (TRUTH / name.replace(".pdf", ".html")).read_text()
        kinds = [("born-digital", lambda n=name: born_digital(common.DEV / n))]
        if not args.no_raster:
            kinds.append(
                (f"{args.dpi} dpi CPU OCR", lambda n=name: rasterised(common.DEV / n, layout, recognizer, args.dpi))
            )
        for kind, build in kinds:
            t0 = time.perf_counter()
            grid = build()
            seconds = time.perf_counter() - t0
            html = tables.to_html(grid, th=False) if grid else ""
            full = teds(html, truth) if grid else 0.0
            structure = teds(html, truth, structure_only=True) if grid else 0.0
            shape = f"{grid.n_rows}×{grid.n_cols}" if grid else "no table"
            rows.append({"page": name, "kind": kind, "teds": full, "teds_s": structure, "shape": shape, "s": seconds})
    extra = {
        "load average (before / after)": f"{load_before} / {common.loadavg()}",
        "ground truth": "bench/tables/*.html (see bench/tables/README.md)",
    }
    md = common.header("Tables — TEDS against ground truth", info, extra)
    md += "\n" + common.table(
        ["page", "path", "TEDS", "structure TEDS", "grid", "s"],
        [[r["page"], r["kind"], r["teds"], r["teds_s"], r["shape"], r["s"]] for r in rows],
    )
    met = all(r["teds"] >= 0.90 and r["teds_s"] >= 0.90 for r in rows)
    md += f"\n\nTarget TEDS ≥ 0.90 on every page and path: {'MET' if met else 'NOT MET'}.\n"
    data = {"machine": info, "rows": rows, "met": met}
    common.report("tables", "Tables", md, data)
    return [
        {
            "bench": "Tables",
            "measure": f"TEDS, {r['page'].removesuffix('.pdf')}, {r['kind']}",
            "ours": round(r["teds"], 3),
            "reference": "ground truth",
            "spread": f"structure-only TEDS {r['teds_s']:.3f}; grid {r['shape']}",
            "goal": "≥ 0.90 (both)",
            "met": "yes" if r["teds"] >= 0.90 and r["teds_s"] >= 0.90 else "no",
        }
        for r in rows
    ]
