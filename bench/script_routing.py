"""script: what judging a page's script by reading, and reading large pages in bands, buy and cost.

Two CPU recognizers on the ``fast`` profile (the default deployment) in one process, A/B
alternating round by round so load from elsewhere hits both: *before* (script check and bands
off, unsure lines re-read by the Latin-cut small head: the engine as it was) and *now*. Pages: the dev Latin pages (the dev scans and born-digital
pages rasterised at 200 dpi) and tests/data/script's Chinese, Japanese and Korean pages at 200
dpi, plus a flatbed-sized sheet (three A4 pages wide and tall, 4959x7017 px) holding the Japanese
page in a corner; ``--poster`` adds a 3x3 poster of the Japanese and Chinese pages (slow).
Truth: the dev gold texts and each PDF's text layer. Word F1 on Latin pages, character F1 on the
others. CPU seconds (getrusage), median over rounds. Goal: Latin pages read and cost as before
(ratio ≤ 1.03); CJK pages ≥ 0.95 character F1; Korean read or flagged ``script:unsupported``.

A third side, *flag only* (now, without Tesseract's models for other scripts), beside *now* on
the evaluation corpus's Declarations in Russian, Hebrew, Hindi and Vietnamese (kind ``other``):
what reading those pages with their script's model (workers/engines/cpu/other_scripts.py) buys
and costs against flagging them; and on the Polish, Czech and Turkish ones (kind ``diacritics``):
what reading again by Tesseract's model of the page's language the lines holding words it does not use
(``RapidOcrRecognizer._reread_unknown_words``) buys and costs.
"""

from __future__ import annotations

import argparse
import resource

import numpy as np
import pymupdf

from bench import common
from bench.accuracy import char_scores, word_scores

SCRIPT_DATA = common.ROOT / "tests" / "data" / "script"
UDHR = common.ROOT / "bench" / "corpus" / "files" / "udhr"
OTHER_SCRIPTS = ("rus", "heb", "hin", "vie")
DIACRITICS = ("pol", "ces", "tur")
LATIN_PDFS = ("multi_page.pdf", "code_and_formula.pdf", "table_nics-background-checks-2015-11.pdf")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _render(page: pymupdf.Page, dpi: int = 200) -> np.ndarray:
    pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csRGB, alpha=False)
    return np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.width, 3).copy()


def _sheet(grid: int, names: tuple[str, ...], corner_only: bool) -> tuple[np.ndarray, str]:
    doc = pymupdf.open()
    sheet = doc.new_page(width=595 * grid, height=842 * grid)
    sources = [pymupdf.open(SCRIPT_DATA / n) for n in names]
    for k in range(1 if corner_only else grid * grid):
        x, y = 595 * (k % grid) + (40 if corner_only else 0), 842 * (k // grid) + (40 if corner_only else 0)
        sheet.show_pdf_page(pymupdf.Rect(x, y, x + 595, y + 842), sources[k % len(sources)], 0)
    return _render(sheet), sheet.get_text()


def pages(poster: bool) -> list[tuple[str, str, np.ndarray, str]]:
    """(name, kind: latin|cjk|korean, image, truth)."""
    out = [(p.name, "latin", p.image, p.truth) for p in common.scan_pages(200)]
    out += [(p.name, "latin", p.image, p.truth) for p in common.born_digital_pages(200, LATIN_PDFS)]
    for name, kind in (("chinese-tables.pdf", "cjk"), ("japanese_text.pdf", "cjk"), ("korean_text.pdf", "korean")):
        with pymupdf.open(SCRIPT_DATA / name) as doc:
            out.append((name, kind, _render(doc[0]), doc[0].get_text()))
    out.append(("sheet 4959×7017 (japanese_text in a corner)", "cjk", *_sheet(3, ("japanese_text.pdf",), True)))
    for kind, languages in (("other", OTHER_SCRIPTS), ("diacritics", DIACRITICS)):
        for lang in languages:
            with pymupdf.open(UDHR / f"udhr_{lang}.pdf") as doc:
                out.append((f"udhr_{lang}.pdf p1", kind, _render(doc[0]), (UDHR / f"udhr_{lang}-p1.txt").read_text()))
    if poster:
        out.append(
            (
                "poster 4959×7017 (3×3 ja/zh pages)",
                "cjk",
                *_sheet(3, ("japanese_text.pdf", "chinese-tables.pdf"), False),
            )
        )
    return out


def run(argv: list[str]) -> list[dict]:
    from workers.engines.cpu import RapidOcrRecognizer, profile_config

    parser = argparse.ArgumentParser(prog="bench script")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--poster", action="store_true", help="add the 3x3 poster (about 20 CPU-s a read)")
    args = parser.parse_args(argv)
    info, load_before = common.machine(), common.loadavg()
    cache = str(common.ROOT / "var" / "bench-models")
    engines = {
        "before": RapidOcrRecognizer(
            profile_config(
                "fast", threads=1, model_cache_dir=cache, script_check=False, tile_min_line_px=0, reread_head="latin"
            )
        ),
        "now": RapidOcrRecognizer(profile_config("fast", threads=1, model_cache_dir=cache)),
        "flag only": RapidOcrRecognizer(profile_config("fast", threads=1, model_cache_dir=cache, other_scripts=False)),
    }
    rows = []
    for name, kind, image, truth in pages(args.poster):
        cpu: dict[str, list[float]] = {side: [] for side in engines}
        read = {}
        for r in range(args.rounds):
            for side in list(engines)[:: 1 if r % 2 == 0 else -1]:
                t = _cpu()
                read[side] = engines[side].read_page(image)
                cpu[side].append(_cpu() - t)
        score = word_scores if kind in ("latin", "diacritics") else char_scores
        f1 = {side: score("\n".join(line.text for line in read[side].lines), truth).f1 for side in engines}
        rows.append(
            {
                "page": name,
                "kind": kind,
                "size": f"{image.shape[1]}×{image.shape[0]}",
                "f1_before": f1["before"],
                "f1_now": f1["now"],
                "cpu_before": common.median(cpu["before"]),
                "cpu_now": common.median(cpu["now"]),
                "f1_flag_only": f1["flag only"],
                "cpu_flag_only": common.median(cpu["flag only"]),
                "script": read["now"].script,
                "flags": ",".join(read["now"].flags),
                "pass": read["now"].detection_pass,
            }
        )
    latin = [r for r in rows if r["kind"] == "latin"]
    ratio = sum(r["cpu_now"] for r in latin) / sum(r["cpu_before"] for r in latin)
    latin_f1_held = all(r["f1_now"] >= r["f1_before"] - 1e-9 for r in latin)
    cjk_ok = all(r["f1_now"] >= 0.95 for r in rows if r["kind"] == "cjk")
    korean_ok = all(r["f1_now"] >= 0.9 or r["flags"] == "script:unsupported" for r in rows if r["kind"] == "korean")
    other = [r for r in rows if r["kind"] == "other"]
    diacritics = [r for r in rows if r["kind"] == "diacritics"]
    met = ratio <= 1.03 and latin_f1_held and cjk_ok and korean_ok
    extra = {
        "load average (before / after)": f"{load_before} / {common.loadavg()}",
        "measure": f"CPU s (getrusage), one thread, median of {args.rounds} alternating rounds per page",
        "sides": "fast profile as it was (no script check, no bands, Latin-head re-reader), now, and now without "
        "Tesseract's models for other scripts (flag only), same process",
    }
    md = common.header("script — script by reading, large pages in bands (fast profile)", info, extra)
    md += "\n" + common.table(
        [
            "page",
            "kind",
            "image",
            "F1 before",
            "F1 flag only",
            "F1 now",
            "CPU-s before",
            "CPU-s flag only",
            "CPU-s now",
            "script",
            "flags",
            "detection",
        ],
        [
            [
                r["page"],
                r["kind"],
                r["size"],
                r["f1_before"],
                r["f1_flag_only"],
                r["f1_now"],
                r["cpu_before"],
                r["cpu_flag_only"],
                r["cpu_now"],
                r["script"],
                r["flags"],
                r["pass"],
            ]
            for r in rows
        ],
    )
    md += (
        f"\n\nLatin pages: CPU now/before {ratio:.3f}, F1 {'held' if latin_f1_held else 'LOST'} on every page; CJK pages "
        f"≥ 0.95 char F1: {'yes' if cjk_ok else 'NO'}; Korean read or flagged: {'yes' if korean_ok else 'NO'}. "
        f"Goal: {'MET' if met else 'NOT MET'}.\n"
    )
    if other:
        md += (
            "\nOther scripts (Russian, Hebrew, Hindi, Vietnamese Declarations): word F1 "
            + ", ".join(f"{r['f1_flag_only']:.2f}→{r['f1_now']:.2f}" for r in other)
            + "; CPU-s flag only → read "
            + ", ".join(f"{r['cpu_flag_only']:.2f}→{r['cpu_now']:.2f}" for r in other)
            + ".\n"
        )
    if diacritics:
        md += (
            "\nPolish, Czech, Turkish Declarations, lines with unknown words read again by Tesseract's model of "
            "the language: word F1 without → with "
            + ", ".join(f"{r['f1_flag_only']:.3f}→{r['f1_now']:.3f}" for r in diacritics)
            + "; CPU-s "
            + ", ".join(f"{r['cpu_flag_only']:.2f}→{r['cpu_now']:.2f}" for r in diacritics)
            + ".\n"
        )
    common.report("script", "script", md, {"machine": info, "rows": rows})
    return [
        {
            "bench": "script",
            "measure": f"CPU-s on {len(latin)} Latin pages, fast profile with the script check and bands vs without",
            "ours": round(sum(r["cpu_now"] for r in latin) / len(latin), 4),
            "reference": round(sum(r["cpu_before"] for r in latin) / len(latin), 4),
            "ratio": f"{ratio:.3f}",
            "spread": "CJK char F1 "
            + ", ".join(f"{r['f1_before']:.2f}→{r['f1_now']:.2f}" for r in rows if r["kind"] == "cjk")
            + "; other scripts word F1 flagged→read "
            + ", ".join(f"{r['f1_flag_only']:.2f}→{r['f1_now']:.2f}" for r in other)
            + ", CPU-s "
            + ", ".join(f"{r['cpu_flag_only']:.1f}→{r['cpu_now']:.1f}" for r in other),
            "goal": "Latin ≤ 1.03× CPU at the same F1; CJK ≥ 0.95 char F1; Korean read or flagged",
            "met": "yes" if met else "no",
        }
    ]
