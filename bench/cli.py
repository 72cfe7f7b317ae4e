"""cli: the embedded CLI as a user runs it, whole process, against the ``tesseract`` command.

``manage.py ocr FILE`` is timed from process start to exit: Python and Django starting, the
database, the models loading, every page, the Markdown written. Two inputs:

* a blank 200-dpi A4 page (PNG): what the CLI costs before any text is read. Goals: ≤ 2.0 CPU-s
  and ≤ 400 MB peak RSS after the first run (the first run also writes the optimised models into
  ``OCR_MODEL_CACHE_DIR`` and creates the database; it is reported apart);
* a 4-page mixed TIFF of public pages outside the dev set (the real pages: a court transcript, a
  dense Federal Register page, a precinct bulletin's table, a UNLV magazine scan), at 200 dpi,
  against ``tesseract FILE stdout`` on the same file. Goal: ≤ 1.3x its CPU-s.

CPU-s is the child's own, read with ``wait4`` (user + system of the process and of the children
it waited for); the peak RSS its own high-water mark (``VmHWM``, polled). One thread each (``OCR_ENGINE_THREADS=1``, ``OMP_THREAD_LIMIT=1``),
as in cpu-engine; the order of the four runs rotates every round.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench import common, stack

BLANK_CPU_GOAL = 2.0
BLANK_RSS_GOAL_MB = 400
TIFF_RATIO_GOAL = 1.3
DPI = 200
# (real page's file, common.real_path; page index): text, dense small print, a table, a scan.
TIFF_PAGES = (
    ("scotus-transcript-p1.pdf", 0),
    ("federal-register-2020-17221.pdf", 0),
    ("la-precinct-bulletin-2014-p1.pdf", 0),
    ("unlv-8071_093.3B.tif", 0),
)


def _inputs(work: Path) -> tuple[Path, Path]:
    from PIL import Image

    blank = work / "blank.png"
    Image.new("L", (1654, 2339), 255).save(blank, dpi=(DPI, DPI))
    pages = []
    for name, index in TIFF_PAGES:
        path = common.real_path(name)
        if path.suffix == ".tif":
            with Image.open(path) as img:
                scale = DPI / float(img.info.get("dpi", (300, 300))[0] or 300)
                pages.append(
                    img.convert("L").resize((round(img.width * scale), round(img.height * scale)), Image.LANCZOS)
                )
        else:
            pages.append(Image.fromarray(common.render(path, index, DPI)).convert("L"))
    tiff = work / "mixed-4.tif"
    pages[0].save(tiff, compression="tiff_lzw", save_all=True, append_images=pages[1:], dpi=(DPI, DPI))
    return blank, tiff


def _run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(CPU-s, peak RSS MB) of one process run to its end. CPU-s is wait4's (the process and the
    children it waited for). The peak is the process's own high-water mark (VmHWM), read every
    10 ms until it exits: wait4's ru_maxrss would report at least this bench process's size, which
    a child inherits at fork and keeps across exec."""
    with tempfile.TemporaryFile() as errors:  # not a pipe: nobody reads it while the process runs
        proc = subprocess.Popen(cmd, cwd=common.ROOT, env=env, stdout=subprocess.DEVNULL, stderr=errors)
        status_file = Path(f"/proc/{proc.pid}/status")
        peak_kb = 0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            try:
                for line in status_file.read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak_kb = max(peak_kb, int(line.split()[1]))
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code:
            errors.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} exited {code}: {errors.read().decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, (peak_kb or usage.ru_maxrss) / 1024


def run(argv: list[str]) -> list[dict]:
    parser = argparse.ArgumentParser(prog="bench cli")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if shutil.which("tesseract") is None:
        raise RuntimeError("the tesseract command is missing: bash .ci/bench-tools.sh")
    info = common.machine()
    load_before = common.loadavg()
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        work = Path(tmp)
        blank, tiff = _inputs(work)
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{work / 'cli.sqlite3'}",
            "OCR_MEDIA_ROOT": str(work / "media"),
            "OCR_MODEL_CACHE_DIR": str(work / "models"),
            "OCR_ENGINE_THREADS": "1",
            "OMP_THREAD_LIMIT": "1",
            # Every run reads its file: the result cache would answer a file read before from the
            # database (a run then costs ~1.5 CPU-s whatever the file).
            "OCR_RESULT_CACHE": "0",
        }
        ours = [str(stack.BIN / "python"), "manage.py", "ocr", "--quiet"]
        tess = ["tesseract"]
        jobs = {
            "ours blank": ours + [str(blank)],
            "tesseract blank": tess + [str(blank), "stdout", "-l", "eng"],
            "ours tiff": ours + [str(tiff)],
            "tesseract tiff": tess + [str(tiff), "stdout", "-l", "eng"],
        }
        first = {name: _run(cmd, env) for name, cmd in jobs.items() if name.startswith("ours")}
        got: dict[str, list[tuple[float, float]]] = {name: [] for name in jobs}
        names = list(jobs)
        for r in range(args.rounds):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                got[name].append(_run(jobs[name], env))
    load_after = common.loadavg()

    def cpu(name: str) -> float:
        return common.median(c for c, _ in got[name])

    def peak(name: str) -> float:
        return max(m for _, m in got[name])

    def spread(name: str) -> str:
        values = [c for c, _ in got[name]]
        return f"{min(values):.2f}–{common.median(values):.2f}–{max(values):.2f}"

    ratios = [o[0] / t[0] for o, t in zip(got["ours tiff"], got["tesseract tiff"], strict=True)]
    rows = [
        {
            "bench": "cli",
            "measure": "embedded CLI (manage.py ocr), blank page: whole-process CPU-s after the first run",
            "ours": round(cpu("ours blank"), 2),
            "reference": BLANK_CPU_GOAL,
            "ratio": round(cpu("ours blank") / BLANK_CPU_GOAL, 2),
            "spread": f"{spread('ours blank')}; first run {first['ours blank'][0]:.2f}; "
            f"tesseract {cpu('tesseract blank'):.2f}",
            "goal": f"≤ {BLANK_CPU_GOAL} CPU-s",
            "met": cpu("ours blank") <= BLANK_CPU_GOAL,
        },
        {
            "bench": "cli",
            "measure": "embedded CLI, blank page: peak RSS MB after the first run",
            "ours": round(peak("ours blank")),
            "reference": BLANK_RSS_GOAL_MB,
            "ratio": round(peak("ours blank") / BLANK_RSS_GOAL_MB, 2),
            "spread": f"first run {first['ours blank'][1]:.0f} MB; tesseract {peak('tesseract blank'):.0f} MB",
            "goal": f"≤ {BLANK_RSS_GOAL_MB} MB",
            "met": peak("ours blank") <= BLANK_RSS_GOAL_MB,
        },
        {
            "bench": "cli",
            "measure": "embedded CLI vs tesseract CLI, 4-page mixed TIFF (200 dpi, real pages): whole-process CPU-s",
            "ours": round(cpu("ours tiff"), 2),
            "reference": round(cpu("tesseract tiff"), 2),
            "ratio": round(cpu("ours tiff") / cpu("tesseract tiff"), 2),
            "spread": f"ratio per round {min(ratios):.2f}–{max(ratios):.2f}; peak {peak('ours tiff'):.0f} vs "
            f"{peak('tesseract tiff'):.0f} MB; first run {first['ours tiff'][0]:.2f} CPU-s",
            "goal": f"ratio ≤ {TIFF_RATIO_GOAL}",
            "met": cpu("ours tiff") <= TIFF_RATIO_GOAL * cpu("tesseract tiff"),
        },
    ]
    table = [[name, spread(name), cpu(name), peak(name), *first.get(name, ("", ""))] for name in names]
    extra = {
        "load average (before / after)": f"{load_before} / {load_after}",
        "inputs": f"blank {DPI}-dpi A4 PNG; 4-page TIFF: " + ", ".join(f"{n} p{i + 1}" for n, i in TIFF_PAGES),
        "ours": "`manage.py ocr --quiet FILE`, OCR_ENGINE_THREADS=1, its own SQLite database and model cache "
        "(created by the first run)",
        "tesseract": f"`tesseract FILE stdout -l eng`, OMP_THREAD_LIMIT=1 ({_tesseract_version()})",
        "CPU-s, peak": "wait4 of each process: user + system; peak: its VmHWM, polled every 10 ms",
        "rounds": f"{args.rounds}, order rotating each round",
    }
    md = common.header("cli — the embedded CLI, whole process, vs the tesseract command", info, extra)
    md += "\n" + common.table(
        ["measure", "ours", "reference", "ratio", "spread", "goal"],
        [
            [r["measure"], r["ours"], r["reference"], r["ratio"], r["spread"], "met" if r["met"] else "NOT met"]
            for r in rows
        ],
    )
    md += "\n\n" + common.table(
        ["run", "CPU-s min–median–max", "CPU-s median", "peak MB", "first run CPU-s", "first run MB"], table
    )
    common.report("cli", "cli", md + "\n", {"machine": info, "rows": rows, "raw": got, "first": first})
    return rows


def _tesseract_version() -> str:
    out = subprocess.run(["tesseract", "--version"], capture_output=True, text=True, check=False)
    return (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else "tesseract"
