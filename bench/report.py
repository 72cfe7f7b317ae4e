"""The dated benchmark report and the README's benchmark block, generated from it.

Every benchmark run through ``python -m bench`` leaves ``bench/results/runs/<date>/<name>.json``:
its exact command, git commit, load average before and after, what it printed, and the summary
rows it returned. ``bench/results/report-<date>.md`` is rebuilt from the day's latest run of each
benchmark; ``python -m bench report [DATE]`` rebuilds it, and ``python -m bench readme`` copies
the newest report's summary table into README.md between the bench markers.

A benchmark function may return ``list[dict]``: summary rows with the keys of ``COLUMNS`` (any
may be missing). One that returns anything else still gets its printed output in the report.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from bench import common

RUNS = common.RESULTS / "runs"
README = common.ROOT / "README.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
COLUMNS = ("bench", "measure", "ours", "reference", "ratio", "spread", "goal", "met")
HEADERS = ("benchmark", "measure", "ours", "reference", "ratio", "spread (min–median–max)", "goal", "met")
# Benchmarks whose rows come from another branch until it is merged: a placeholder keeps the
# table honest about what this report does not hold.
PLACEHOLDERS: dict[str, dict] = {}
ORDER = ("pipeline", "cpu-engine", "cli", "memory", "text-layer", "ingest", "tables", "orientation")
# Runs recorded before the benchmarks were named for what they measure.
FORMER_NAMES = {"p1": "pipeline", "p2": "cpu-engine", "p2tune": "cpu-knobs", "p3": "text-layer", "p4": "ingest"}


class _Tee(io.TextIOBase):
    """Writes go to the real stdout (live progress) and are kept for the report."""

    def __init__(self, live) -> None:
        self.live, self.kept = live, io.StringIO()

    def write(self, text: str) -> int:
        self.live.write(text)
        self.kept.write(text)
        return len(text)

    def flush(self) -> None:
        self.live.flush()


def git_commit() -> str:
    def git(*args: str) -> str:
        out = subprocess.run(["git", *args], cwd=common.ROOT, capture_output=True, text=True)
        return out.stdout.strip() if out.returncode == 0 else ""

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    # Untracked scratch under bench/results/ is ignored, and so is Markdown (the README block is
    # regenerated between runs); a modified tracked code file is not.
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!*.md")
    return commit + (" (with uncommitted changes)" if dirty else "")


def command_line(name: str, args: list[str], whole: bool) -> str:
    if whole:
        return "make bench"
    return "make bench BENCH_ARGS=" + _quote(" ".join([name, *args]))


def _quote(text: str) -> str:
    return text if re.fullmatch(r"[\w./=,:-]+", text) else "'" + text.replace("'", "'\\''") + "'"


def run_one(name: str, func: Callable[[list[str]], object], args: list[str], whole: bool = False) -> dict:
    """Run one benchmark, keep what it printed and returned; a failure is recorded, not raised."""
    started = dt.datetime.now(dt.UTC)
    commit = git_commit()  # the code that runs, whatever is committed while it runs
    load_before = common.loadavg()
    tee = _Tee(sys.stdout)
    t0 = time.perf_counter()
    error = ""
    result: object = None
    with contextlib.redirect_stdout(tee):
        try:
            result = func(args)
        except Exception:
            error = traceback.format_exc()
            print(error, file=sys.stderr, flush=True)
    rows = [r for r in result if isinstance(r, dict)] if isinstance(result, list) else []
    record = {
        "name": name,
        "command": command_line(name, args, whole),
        "commit": commit,
        "machine": _machine(),
        "started": started.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "seconds": round(time.perf_counter() - t0),
        "load_before": load_before,
        "load_after": common.loadavg(),
        # "detail" marks a row for its benchmark's own section only (the summary leaves it out).
        "rows": [{k: r[k] for k in (*COLUMNS, "detail") if k in r} for r in rows],
        "output": tee.kept.getvalue(),
        "error": error,
    }
    day = RUNS / started.strftime("%Y-%m-%d")
    day.mkdir(parents=True, exist_ok=True)
    (day / f"{name}.json").write_text(json.dumps(record, indent=2, default=str))
    return record


def _machine() -> str:
    info = common.machine()
    return f"{info['cpu']}, {info['nproc']} cores, {info['ram_gib']} GiB RAM, Python {info['python']}"


UNRECORDED = "not recorded (a run from before records named their machine)"


def _machines(records: dict[str, dict]) -> str:
    """Each machine the day's runs were recorded on, with its benchmarks: one day's runs may come
    from different machines (the same model name with and without AVX-512, say)."""
    seen: dict[str, list[str]] = {}
    for name, record in records.items():
        seen.setdefault(record.get("machine") or UNRECORDED, []).append(name)
    if len(seen) == 1:
        return next(iter(seen))
    return "; ".join(f"{machine} ({', '.join(names)})" for machine, names in seen.items())


def _cell(value: object) -> str:
    if isinstance(value, bool):
        value = "yes" if value else "no"
    return str(value if value is not None else "").replace("|", "\\|").replace("\n", " ")


def summary_table(rows: list[dict]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join(" --- " for _ in HEADERS) + "|"]
    lines += ["| " + " | ".join(_cell(r.get(k, "")) for k in COLUMNS) + " |" for r in rows]
    return "\n".join(lines)


def build(date: str) -> str:
    """The report for ``date`` (YYYY-MM-DD) from that day's runs."""
    day = RUNS / date
    # A run under a former name is read first, so a later run under today's name replaces it.
    paths = sorted(day.glob("*.json"), key=lambda p: (p.stem not in FORMER_NAMES, p.name))
    records = {FORMER_NAMES.get(p.stem, p.stem): json.loads(p.read_text()) for p in paths}
    # Only benchmark records (run_one's): `make eval` keeps its own JSON beside them.
    records = {name: r for name, r in records.items() if "rows" in r and "command" in r}
    if not records:
        raise FileNotFoundError(f"no benchmark runs under {day}")
    names = [n for n in ORDER if n in records] + sorted(n for n in records if n not in ORDER)
    rows: list[dict] = []
    for name in ORDER:
        if name in records and records[name]["rows"]:
            rows += records[name]["rows"]
        elif name in records and records[name]["error"]:
            rows.append({"bench": name.upper(), "met": f"failed: see the {name} section"})
        elif name in PLACEHOLDERS:
            rows.append(PLACEHOLDERS[name])
    for name in names:
        if name not in ORDER:
            rows += records[name]["rows"]
    # Rows marked detail (cpu-engine's per page) are in their benchmark's own section, not the summary.
    rows = [r for r in rows if not r.get("detail")]
    commits = sorted({r["commit"] for r in records.values()})
    out = [
        f"# Benchmark report {date}",
        "",
        f"- machine: {_machines(records)}",
        f"- date: {date} (runs {min(r['started'] for r in records.values())} to "
        f"{max(r['started'] for r in records.values())})",
        f"- git commit: {', '.join(commits)}",
        "- load average: per benchmark below (before → after); the box is shared, so every "
        "comparison alternates its two sides",
        f"- regenerate: `python -m bench report {date}`; README block: `make bench-readme`",
        "",
        "## Summary",
        "",
        summary_table(rows),
        "",
    ]
    for name in names:
        r = records[name]
        out += [
            f"## {name}",
            "",
            f"- command: `{r['command']}`",
            f"- started: {r['started']}, took {r['seconds']} s, git commit {r['commit']}",
            f"- machine: {r.get('machine') or UNRECORDED}",
            f"- load average before → after: {r['load_before']} → {r['load_after']}",
            "",
            r["output"].strip() or "(printed nothing)",
            "",
        ]
        if r["error"]:
            out += ["Failed:", "", "```", r["error"].strip(), "```", ""]
    return "\n".join(out)


def write(date: str) -> Path:
    path = common.RESULTS / f"report-{date}.md"
    path.write_text(build(date))
    return path


def newest_report() -> Path:
    reports = sorted(common.RESULTS.glob("report-????-??-??.md"))
    if not reports:
        raise FileNotFoundError(f"no report-YYYY-MM-DD.md under {common.RESULTS}: run make bench first")
    return reports[-1]


def readme_block(report: str, source: str) -> str:
    """The README's block: where the figures come from, the machine, and the summary table."""
    head = report.split("\n## ", 1)[0]  # the report's own facts, not a benchmark section's
    facts = dict(re.findall(r"^- (machine|date|git commit): (.+)$", head, flags=re.M))
    match = re.search(r"^## Summary\n\n(.*?)(?:\n\n|\Z)", report, flags=re.S | re.M)
    if match is None:
        raise ValueError("the report has no '## Summary' table")
    return "\n".join(
        [
            START,
            f"<!-- generated by `make bench-readme` from {source}; edit the report, not this block -->",
            f"Measured {facts.get('date', '?')} on {facts.get('machine', '?')}, git commit "
            f"{facts.get('git commit', '?')}. Exact commands, load averages and every run: [{source}]({source}).",
            "",
            match.group(1).strip(),
            END,
        ]
    )


def replace_block(readme: str, block: str) -> str:
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md has no {START} … {END} block")
    return readme[:start] + block + readme[end + len(END) :]


def update_readme(report: Path | None = None) -> Path:
    report = report or newest_report()
    source = report.resolve().relative_to(common.ROOT).as_posix()
    README.write_text(replace_block(README.read_text(), readme_block(report.read_text(), source)))
    return README
