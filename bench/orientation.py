"""orientation: what turning scans upright costs ingest on an upright page, and whether it finds
the turn on every page turned every way.

Ours: ``detect_orientation`` on the page image ingest stores (OCR_DPI renders of the dev PDFs
and the dev TIFFs as decoded). Reference: the work ingest already does for that page without
it — render (or decode) and encode the PNG it stores. CPU seconds (getrusage), the two sides
alternating round by round, median per page. Goal: at most 20 CPU-ms on every upright 200-dpi
page (a page's CPU OCR takes seconds), and 0/90/180/270 found on every page.
"""

from __future__ import annotations

import argparse
import resource

import numpy as np
import pymupdf
from PIL import Image

from apps.jobs.documents import detect_orientation, encode_png, render_pdf_page
from bench import common
from bench.engines import django_settings

PDFS = ("scanned_ocr_test.pdf", "multi_page.pdf", "code_and_formula.pdf", "table_nics-background-checks-2015-11.pdf")
TIFFS = ("phototest.tif", "eurotext.tif")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(argv: list[str]) -> list[dict]:
    parser = argparse.ArgumentParser(prog="bench orientation")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    s = django_settings()
    info, load_before = common.machine(), common.loadavg()

    pages = []  # (name, ingest's own work for the page, image, dpi)
    for name in PDFS:
        with pymupdf.open(common.DEV / name) as doc:
            for i in range(len(doc)):

                def work(path=common.DEV / name, i=i):
                    with pymupdf.open(path) as d:
                        image, dpi = render_pdf_page(d[i], s.OCR_DPI, s.OCR_MAX_IMAGE_PIXELS)
                    encode_png(image)
                    return image, dpi

                pages.append((f"{name} p{i + 1}", work, *work()))
    for name in TIFFS:

        def work(path=common.DEV / name):
            with Image.open(path) as img:
                image = np.asarray(img.convert("RGB"))
            encode_png(image)
            return image, 300

        pages.append((name, work, *work()))

    rows, wrong = [], []
    for name, work, image, dpi in pages:
        ours, ref = [], []
        for _ in range(args.rounds):  # A/B alternating, so load from elsewhere hits both
            t = _cpu()
            detect_orientation(image, dpi)
            ours.append(_cpu() - t)
            t = _cpu()
            work()
            ref.append(_cpu() - t)
        for rotation in (0, 90, 180, 270):
            found = detect_orientation(np.ascontiguousarray(np.rot90(image, -rotation // 90)), dpi).rotation
            if found != rotation:
                wrong.append(f"{name} at {rotation}: {found}")
        o, r = common.median(ours), common.median(ref)
        rows.append({"page": name, "size": f"{image.shape[1]}×{image.shape[0]}", "ours": o, "ref": r, "share": o / r})

    mean_o = sum(r["ours"] for r in rows) / len(rows)
    mean_r = sum(r["ref"] for r in rows) / len(rows)
    share = mean_o / mean_r
    worst = max(r["ours"] for r in rows)
    met = worst <= 0.020 and not wrong
    extra = {
        "load average (before / after)": f"{load_before} / {common.loadavg()}",
        "measure": f"CPU s (getrusage), median of {args.rounds} alternating rounds per page",
        "reference": f"ingest's own work for the page: render at {s.OCR_DPI} dpi (TIFF: decode) + PNG encode",
        "turns found": f"{4 * len(rows) - len(wrong)} of {4 * len(rows)}" + (f" (wrong: {wrong})" if wrong else ""),
    }
    md = common.header("orientation — scan orientation step on upright pages", info, extra)
    md += "\n" + common.table(
        ["page", "image", "orientation ms", "render+encode ms", "share"],
        [[r["page"], r["size"], r["ours"] * 1000, r["ref"] * 1000, r["share"]] for r in rows],
    )
    md += (
        f"\n\nMean: orientation {mean_o * 1000:.0f} CPU-ms/page (worst {worst * 1000:.0f}), {share:.1%} of "
        f"ingest's own work for it. Goal ≤ 20 CPU-ms on every page, every turn found: {'MET' if met else 'NOT MET'}.\n"
    )
    common.report("orientation", "orientation", md, {"machine": info, "rows": rows, "wrong": wrong})
    return [
        {
            "bench": "orientation",
            "measure": f"CPU-s/page, scan orientation step (ours) vs ingest's render+encode, {len(rows)} upright pages",
            "ours": round(mean_o, 4),
            "reference": round(mean_r, 4),
            "ratio": f"+{share:.1%}",
            "spread": "per page "
            + "–".join(f"{v:.1%}" for v in sorted(r["share"] for r in rows)[:: max(1, len(rows) - 1)]),
            "goal": "≤ 20 CPU-ms on every page; every turn found",
            "met": "yes" if met else "no",
        }
    ]
