"""The dated evaluation report (Markdown) and its run record (JSON), from the runner's page records."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from bench.evaluation import gates

TURNS = (0, 90, 180, 270)
_TESS_MODE = {
    "all": "every page",
    "upright": "the upright pages (turn 0; turned ones left out for CPU)",
    "none": "no page",
}
TRAIL = 0.005


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _f(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _table(headers: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _tess_f1(r: dict) -> float | None:
    t = r.get("tesseract") or {}
    return t.get("f1")


def f1_table(records: list[dict], key: Callable[[dict], str], title: str) -> str:
    """Mean primary F1 per group: ours over scored pages; Tesseract over the same pages where it ran."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        groups[key(r)].append(r)
    rows = []
    for name in sorted(groups):
        rs = groups[name]
        scored = [r for r in rs if gates.scored(r)]
        both = [r for r in scored if _tess_f1(r) is not None]
        declined = sum(1 for r in rs if r["status"] != "done")
        ours = _mean(r["f1"] for r in scored)
        ours_both = _mean(r["f1"] for r in both)
        theirs = _mean(_tess_f1(r) for r in both)
        delta = None if ours_both is None or theirs is None else ours_both - theirs
        rows.append(
            [
                name,
                len(rs),
                len(scored),
                declined,
                _f(ours),
                f"{_f(ours_both)} vs {_f(theirs)} ({len(both)})" if both else "–",
                "–" if delta is None else f"{delta:+.3f}",
            ]
        )
    headers = [title, "pages", "scored", "not done", "ours F1", "ours vs Tesseract (pages)", "Δ"]
    return _table(headers, rows)


def confusion(records: list[dict], key: Callable[[dict], str], title: str) -> str:
    """Orientation: for each group, pages by expected turn → what the JSON's rotation said."""
    groups: dict[str, Counter] = defaultdict(Counter)
    for r in records:
        if r["status"] == "done":
            groups[key(r)][(r["expected_rotation"], r["rotation"] or 0)] += 1
    rows = []
    for name in sorted(groups):
        c = groups[name]
        cells = []
        for exp in TURNS:
            row = [c[(exp, got)] for got in TURNS]
            total = sum(row)
            cells.append("–" if not total else f"{row[TURNS.index(exp)]}/{total}" + _misses(exp, row))
        rows.append([name, *cells])
    headers = [title] + [f"expected {t}° (right/all; wrong → got)" for t in TURNS]
    return _table(headers, rows)


def _misses(exp: int, row: list[int]) -> str:
    wrong = [f"{n}→{got}" for got, n in zip(TURNS, row, strict=True) if n and got != exp]
    return f" ({', '.join(wrong)})" if wrong else ""


def composition(records: list[dict]) -> str:
    by = [
        ("source", lambda r: r["source"]),
        ("kind", lambda r: r["kind"]),
        ("script", lambda r: r["script"]),
        ("dpi", lambda r: str(r["dpi"])),
        ("DPI metadata", lambda r: "yes" if r["meta"] else "no"),
        ("turn", lambda r: f"{r['turn']}°"),
        ("size", lambda r: r["size"]),
    ]
    parts = []
    for title, key in by:
        counts = Counter(key(r) for r in records)
        parts.append(f"- by {title}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return "\n".join(parts)


def render(records: list[dict], meta: dict, verdict: gates.GateResult) -> str:
    m = meta["machine"]
    out = [
        f"# Evaluation corpus report — {meta['started'][:10]} ({meta['slice']} slice"
        + (f", pages matching `{meta['only']}`" if meta["only"] else "")
        + ")",
        "",
        f"- run: {meta['started']} to {meta['finished']}, git commit {meta['commit']}",
        f"- machine: {m['nproc']} CPU ({m['cpu']}), {m['ram_gib']} GiB RAM, Python {m['python']}; "
        f"load average at the end {meta['load_average']}",
        "- command: "
        + (
            meta["command"]
            if meta.get("command")
            else f"`make {'eval-ci' if meta['slice'] == 'ci' else 'eval'}` (`python -m bench.evaluation"
            + (" --ci" if meta["slice"] == "ci" else "")
            + "`)"
        )
        + (f"; CI-slice pages taken from {meta['derived_from']}" if meta.get("derived_from") else ""),
        f"- ours: the embedded pipeline of `manage.py ocr` (apps.jobs.embedded), engine {meta['engine']}, "
        "each page its own job, OCR forced",
        (
            f"- **partial run**: {meta['pages']} of the {meta['planned']} pages planned (cut short; "
            "every figure below is over the pages that ran)"
            if meta.get("planned", meta["pages"]) > meta["pages"]
            else "- complete: every page planned ran"
        ),
        f"- Tesseract: {meta['tesseract'] or 'not run'} through tesserocr, PSM AUTO_OSD, the same pixels, "
        f"on {_TESS_MODE.get(meta.get('tesseract_mode', 'all'), 'every page')}; "
        f"languages here: {', '.join(meta['tesseract_languages']) or '–'}",
        f"- pages: {meta['pages']} from {meta['documents']} documents; CPU: {meta['cpu_seconds']} s in all "
        f"(ours {meta['ours_cpu_seconds']} s, Tesseract {meta['tesseract_cpu_seconds']} s), "
        f"{meta.get('jobs', 1)} process(es), each building its engines once",
        "- scores: primary F1 per page (character F1 for Chinese and Japanese, word F1 otherwise; "
        "bench/evaluation/scoring.py); classes are `kind/script`",
        "",
        "## Gates",
        "",
    ]
    if meta.get("baseline"):
        out.append(f"Baseline for gate 3: `{meta['baseline']}`, tolerance {meta['tolerance']}.")
    else:
        out.append("Gate 3 not checked in this run (no baseline, or the baseline was being recorded).")
    out.append("")
    out += [f"- FAIL {line}" for line in verdict.lines()] or ["- all gates passed"]
    out += ["", "## Corpus composition", "", composition(records), ""]
    out += ["## F1 per class", "", f1_table(records, lambda r: r["cls"], "class"), ""]
    out += ["### by script", "", f1_table(records, lambda r: r["script"], "script"), ""]
    out += ["### by resolution and DPI metadata", ""]
    out += [f1_table(records, lambda r: f"{r['dpi']} dpi, metadata {'yes' if r['meta'] else 'no'}", "page"), ""]
    out += ["### by turn", "", f1_table(records, lambda r: f"{r['turn']}°", "turn"), ""]
    out += ["### by size and print", ""]
    out += [f1_table(records, lambda r: r["size"] + (", faint" if r["faint"] else ""), "size"), ""]
    out += ["## Orientation", "", "Per class:", "", confusion(records, lambda r: r["cls"], "class"), ""]
    out += ["Per resolution, with and without DPI metadata:", ""]
    out += [confusion(records, lambda r: f"{r['dpi']} dpi, metadata {'yes' if r['meta'] else 'no'}", "page"), ""]

    low = [r for r in records if r["status"] == "done" and r["f1"] is not None and r["f1"] < gates.LOW_F1]
    out += ["## Pages done below 0.5 F1", ""]
    out += [
        _table(
            ["page", "F1", "Tesseract", "rotation (expected)", "flags", "confidence"],
            [
                [
                    r["id"],
                    _f(r["f1"]),
                    _f(_tess_f1(r)),
                    f"{r['rotation']} ({r['expected_rotation']})",
                    ", ".join(r["flags"]) or "**none**",
                    _f(r.get("confidence") if r.get("confidence") is not None else r.get("region_confidence")),
                ]
                for r in low
            ],
        )
        if low
        else "None."
    ]
    out += [""]
    trail = [r for r in records if gates.scored(r) and _tess_f1(r) is not None and r["f1"] < _tess_f1(r) - TRAIL]
    out += [f"## Pages where we trail Tesseract by more than {TRAIL}", ""]
    out += [
        _table(
            ["page", "ours", "Tesseract", "Δ", "rotation (expected)", "flags"],
            [
                [
                    r["id"],
                    _f(r["f1"]),
                    _f(_tess_f1(r)),
                    f"{r['f1'] - _tess_f1(r):+.3f}",
                    f"{r['rotation']} ({r['expected_rotation']})",
                    ", ".join(r["flags"]) or "–",
                ]
                for r in sorted(trail, key=lambda r: r["f1"] - _tess_f1(r))
            ],
        )
        if trail
        else "None."
    ]
    out += ["", "## Every page", ""]
    out += [
        _table(
            [
                "page",
                "class",
                "dpi",
                "meta",
                "turn",
                "pixels",
                "status",
                "rotation (exp.)",
                "flags",
                "conf. (page / regions)",
                "F1",
                "word / char",
                "Tesseract",
                "CPU-s",
            ],
            [
                [
                    r["id"],
                    r["cls"],
                    r["dpi"],
                    "yes" if r["meta"] else "no",
                    r["turn"],
                    r["pixels"],
                    r["status"] + (f" `{r['error'].split()[0]}`" if r.get("error") else ""),
                    f"{r['rotation']} ({r['expected_rotation']})",
                    ", ".join(r["flags"]) or "–",
                    f"{_f(r.get('confidence'))} / {_f(r.get('region_confidence'))}",
                    _f(r["f1"]),
                    f"{_f(r.get('word_f1'))} / {_f(r.get('char_f1'))}" if r["f1"] is not None else "–",
                    _f(_tess_f1(r)),
                    f"{r['cpu']:.1f}",
                ]
                for r in records
            ],
        )
    ]
    return "\n".join(out) + "\n"


def write(records: list[dict], meta: dict, verdict: gates.GateResult, results: Path) -> list[Path]:
    date = meta["started"][:10]
    name = "eval" if meta["slice"] == "full" else "eval-ci"
    if meta["only"]:
        name += "-partial"
    # A partial run (--only) is scratch: its JSON stays beside its report, outside the kept runs.
    runs = results if meta["only"] else results / "runs" / date
    runs.mkdir(parents=True, exist_ok=True)
    run_json = runs / (f"{name}-{date}.json" if meta["only"] else f"{name}.json")
    run_json.write_text(
        json.dumps({"meta": meta, "gates": verdict.lines(), "pages": records}, indent=1, ensure_ascii=False) + "\n"
    )
    md = results / f"{name}-{date}.md"
    md.write_text(render(records, meta, verdict))
    return [md, run_json]
