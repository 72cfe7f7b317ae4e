"""The README's benchmark table is generated from a dated report, never typed by hand.

No benchmark runs here: recorded runs are written as the runner writes them, the report is built
from them, and the README block from the report.
"""

from __future__ import annotations

import json
import re

from bench import common, report

RUN = {
    "name": "p4",
    "command": "make bench BENCH_ARGS=p4",
    "commit": "0123456789ab",
    "machine": "AMD EPYC; avx2, 2 cores, 23.5 GiB RAM, Python 3.11.7",
    "started": "2026-01-02 03:04:05 UTC",
    "seconds": 250,
    "load_before": "1.00 0.50 0.20",
    "load_after": "3.10 2.00 1.00",
    "rows": [
        {
            "bench": "P4",
            "measure": "ingest 202/s",
            "ours": 80.0,
            "reference": 160.0,
            "ratio": 0.5,
            "spread": "product 70.0–80.0–90.0 | reference",
            "goal": "ratio ≥ 1.0",
            "met": "no",
        }
    ],
    # A benchmark's own header has machine/date lines too; the README must take the report's.
    "output": "### P4 — ingest\n\n- machine: not this one\n- date: nor this\n\n| round | server |\n| --- | --- |\n| 1 | product |\n",
    "error": "",
}


def _report(tmp_path, monkeypatch) -> str:
    monkeypatch.setattr(report, "RUNS", tmp_path / "runs")
    day = tmp_path / "runs" / "2026-01-02"
    day.mkdir(parents=True)
    (day / "p4.json").write_text(json.dumps(RUN))
    other = RUN["machine"].replace("avx2", "avx2+avx512f")
    (day / "p3.json").write_text(
        json.dumps({**RUN, "name": "p3", "machine": other, "rows": [], "output": "p3 printed this\n"})
    )
    return report.build("2026-01-02")


def test_report_holds_rows_outputs_and_machine_of_runs_recorded_under_former_names(tmp_path, monkeypatch):
    text = _report(tmp_path, monkeypatch)
    assert text.startswith("# Benchmark report 2026-01-02")
    # Runs of one day can come from different machines: the report names each with its runs, from
    # the records (not the machine that builds the report).
    assert (
        "- machine: AMD EPYC; avx2+avx512f, 2 cores, 23.5 GiB RAM, Python 3.11.7 (text-layer); "
        "AMD EPYC; avx2, 2 cores, 23.5 GiB RAM, Python 3.11.7 (ingest)\n" in text
    )
    # Runs recorded as p3/p4 (before the benchmarks were named for what they measure) are read
    # under their names of today.
    p3_section = text.split("## text-layer\n", 1)[1].split("## ingest\n", 1)[0]
    assert "- machine: AMD EPYC; avx2+avx512f, 2 cores, 23.5 GiB RAM, Python 3.11.7\n" in p3_section
    assert "- git commit: 0123456789ab" in text
    summary = text.split("## Summary\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert summary[0].startswith("| benchmark | measure | ours | reference | ratio |")
    assert (
        "| P4 | ingest 202/s | 80.0 | 160.0 | 0.5 | product 70.0–80.0–90.0 \\| reference | ratio ≥ 1.0 | no |"
        in summary
    )
    # A benchmark with no rows still has its printed output and its command in the report.
    assert "p3 printed this" in text
    assert "- command: `make bench BENCH_ARGS=p4`" in text
    assert "- load average before → after: 1.00 0.50 0.20 → 3.10 2.00 1.00" in text


def test_a_run_recorded_without_its_machine_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "RUNS", tmp_path / "runs")
    day = tmp_path / "runs" / "2026-01-02"
    day.mkdir(parents=True)
    (day / "p4.json").write_text(json.dumps({k: v for k, v in RUN.items() if k != "machine"}))
    text = report.build("2026-01-02")
    assert f"- machine: {report.UNRECORDED}\n" in text, "not the machine that happens to build the report"


def test_readme_block_is_the_reports_summary(tmp_path, monkeypatch):
    text = _report(tmp_path, monkeypatch)
    block = report.readme_block(text, "bench/results/report-2026-01-02.md")
    assert block.startswith(report.START) and block.endswith(report.END)
    assert "[bench/results/report-2026-01-02.md](bench/results/report-2026-01-02.md)" in block
    assert "Measured 2026-01-02 (runs " in block and "not this one" not in block and "nor this" not in block
    table = text.split("## Summary\n\n", 1)[1].split("\n\n", 1)[0]
    assert table in block
    readme = f"# Title\n\n## Benchmarks\n\n{report.START}\nold figures\n{report.END}\n\n## Next\n"
    updated = report.replace_block(readme, block)
    assert "old figures" not in updated
    assert updated.startswith("# Title\n\n## Benchmarks\n\n") and updated.endswith("\n\n## Next\n")
    assert report.replace_block(updated, block) == updated  # idempotent


def test_the_readme_block_matches_the_committed_report_it_names():
    readme = report.README.read_text()
    start, end = readme.index(report.START), readme.index(report.END) + len(report.END)
    block = readme[start:end]
    source = re.search(r"from (bench/results/report-\d{4}-\d{2}-\d{2}\.md)", block).group(1)
    assert block == report.readme_block((common.ROOT / source).read_text(), source)
