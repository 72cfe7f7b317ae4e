"""``python -m bench.evaluation``: every corpus page through the embedded pipeline, scored, with
Tesseract beside it; a dated report and the run's JSON; the gates for CI.

One process for the whole run: the pipeline ``manage.py ocr`` runs (``apps.jobs.embedded``:
ingest → orientation → layout → recognition → assembly, Celery eager) against a throw-away SQLite
database and media folder, so the engines are built by the first page and reused. Each page is
its own job, submitted as ``manage.py ocr`` would submit the file; what is scored is the job's
JSON result: its regions' text, the page's ``rotation``, ``flags`` and ``confidence`` (when the
JSON has one; the mean of its regions' confidences is reported beside it).

    python -m bench.evaluation                 # the whole corpus (make eval)
    python -m bench.evaluation --ci --gate     # the CI slice, gates on (make eval-ci)
    python -m bench.evaluation --only 'receipt' --no-tesseract
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.evaluation import corpus, gates, scoring

ROOT = Path(__file__).resolve().parent.parent.parent
RESULTS = ROOT / "bench" / "results"
BASELINE = corpus.CORPUS / "baseline-ci.json"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True)
        return out.stdout.strip() + (" (with uncommitted changes)" if dirty.stdout.strip() else "")
    except OSError:
        return "?"


def _setup_django(workdir: Path):
    """The embedded pipeline on a throw-away database and media folder (never the developer's)."""
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir / 'eval.sqlite3'}"
    os.environ["OCR_MEDIA_ROOT"] = str(workdir / "media")
    # Every page must be read: two corpus pages of the same bytes (phototest-rotated-L is
    # phototest turned, as one of phototest's variants is) were answered from the result cache,
    # whose file this runner had already deleted with the first page's media (2 pages "crashed").
    os.environ["OCR_RESULT_CACHE"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ocrsite.settings")
    import django

    django.setup()
    from django.conf import settings

    from apps.jobs import embedded

    embedded.start()
    return settings


def _region_confidence(page_json: dict) -> float | None:
    """Mean of the regions' recognition confidences, weighted by their text's length."""
    total = weight = 0.0
    for region in page_json.get("regions", []):
        conf, text = region.get("confidence"), region.get("text") or ""
        if conf is not None and text.strip():
            total += float(conf) * len(text)
            weight += len(text)
    return round(total / weight, 4) if weight else None


def _read_result(job) -> dict:
    from django.core.files.storage import default_storage

    with default_storage.open(job.result_json.name, "rb") as fh:
        return json.loads(fh.read().decode())


def _clear_media(media: Path) -> None:
    # One job at a time: its upload, page images and results are read; keep the disk small.
    if media.exists():
        shutil.rmtree(media, ignore_errors=True)


def run_page(page: corpus.Page, settings, tess, media: Path, tesseract: str = "all") -> dict:
    from apps.jobs import embedded
    from apps.jobs.documents import InputError
    from bench.accuracy import json_text

    doc = page.doc
    derived = corpus.derive(page, ocr_dpi=settings.OCR_DPI, max_pixels=settings.OCR_MAX_IMAGE_PIXELS)
    truth = doc.truth_text(page.number)
    record = {
        "id": page.id,
        "doc": doc.id,
        "page": page.number,
        "variant": page.variant.spec,
        "source": doc.source.name,
        "kind": doc.kind,
        "script": doc.script,
        "cls": page.cls,
        "dpi": derived.dpi,
        "meta": derived.meta,
        "turn": page.variant.turn,
        "faint": page.variant.faint,
        "pixels": f"{derived.image.shape[1]}x{derived.image.shape[0]}",
        "size": derived.size_class,
        "expected_rotation": page.expected_rotation,
        "has_truth": truth is not None,
    }
    c0, w0 = _cpu(), time.perf_counter()
    text = ""
    try:
        pages_opt = str(page.number) if page.variant.resolution == "orig" and doc.is_pdf else ""
        job = embedded.submit(
            io.BytesIO(derived.data), derived.filename, len(derived.data), force_ocr=True, pages=pages_opt
        )
        record["status"] = str(job.status)
        record["error"] = f"{job.error_code} {job.error_message}".strip() if job.error_code else ""
        if job.status == "done":
            result = _read_result(job)
            page_json = result["pages"][0]
            text = json_text({"pages": [page_json]})
            record["rotation"] = page_json.get("rotation", 0)
            record["flags"] = list(page_json.get("flags") or [])
            record["confidence"] = page_json.get("confidence")
            record["region_confidence"] = _region_confidence(page_json)
    except InputError as exc:
        record["status"] = "refused"
        record["error"] = f"{exc.code} {exc.message}"
    except Exception as exc:  # an engine that raises on one page is that page's result, not the run's end
        record["status"] = "crashed"
        record["error"] = f"{type(exc).__name__}: {exc}"[:300]
    record["cpu"] = round(_cpu() - c0, 3)
    record["wall"] = round(time.perf_counter() - w0, 3)
    record.setdefault("rotation", None)
    record.setdefault("flags", [])
    _clear_media(media)
    if truth is not None:
        record.update(scoring.score(text, truth, doc.script))
    else:
        record.update({"measure": scoring.primary_measure(doc.script), "f1": None})
    record["text_chars"] = len(text)

    record["tesseract"] = None
    if tess is not None and tess.has(doc.lang) and (tesseract == "all" or page.variant.turn == 0):
        c0 = _cpu()
        ttext = tess.read(derived.image, doc.lang, derived.dpi if derived.meta else None)
        t = {"cpu": round(_cpu() - c0, 3), "lang": doc.lang}
        if truth is not None:
            t.update(scoring.score(ttext, truth, doc.script))
        record["tesseract"] = t
    return record


def _summary_line(r: dict) -> str:
    f1 = "  -  " if r["f1"] is None else f"{r['f1']:.3f}"
    t = r.get("tesseract") or {}
    tf1 = f"{t['f1']:.3f}" if t.get("f1") is not None else "  -  "
    flags = ",".join(r["flags"]) or "-"
    rot = "?" if r["rotation"] is None else r["rotation"]
    return (
        f"{r['id']:<52} {r['status']:<7} F1 {f1} tess {tf1} rot {rot}/{r['expected_rotation']} "
        f"flags {flags} cpu {r['cpu']:.1f}s"
    )


def _run_here(todo: list[corpus.Page], *, tesseract: str, label: str = "", progress: Path | None = None) -> dict:
    """Every page of ``todo`` through the embedded pipeline in this process (engines built once).
    ``tesseract``: ``all`` pages, ``upright`` ones only (turn 0), or ``none``. With ``progress``,
    the records so far are rewritten there after each page, so a run cut short keeps its pages."""
    workdir = Path(tempfile.mkdtemp(prefix="ocr-eval-"))
    records: list[dict] = []
    try:
        settings = _setup_django(workdir)
        tess = None
        if tesseract != "none":
            from bench.evaluation.tesseract import Tesseract

            try:
                tess = Tesseract()
            except Exception as exc:  # the report says Tesseract did not run, and why
                print(f"eval: Tesseract unavailable ({exc}); its column stays empty", file=sys.stderr)
        cpu0 = _cpu()
        out = {
            "records": records,
            "planned": len(todo),
            "tesseract_mode": tesseract,
            "tesseract": tess.version if tess else None,
            "tesseract_languages": sorted(tess.installed) if tess else [],
            "engine": f"{settings.OCR_ENGINE} (OCR_CPU_PROFILE={settings.OCR_CPU_PROFILE}, OCR_DPI={settings.OCR_DPI})",
        }
        for i, page in enumerate(todo, 1):
            record = run_page(page, settings, tess, workdir / "media", tesseract)
            records.append(record)
            print(f"{label}[{i}/{len(todo)}] {_summary_line(record)}", file=sys.stderr, flush=True)
            out["cpu_seconds"] = _cpu() - cpu0
            if progress is not None:
                tmp = progress.with_suffix(".tmp")
                tmp.write_text(json.dumps(out, ensure_ascii=False))
                tmp.replace(progress)
        out["cpu_seconds"] = _cpu() - cpu0
        if tess:
            tess.close()
        return out
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run_shards(argv: list[str], jobs: int, shard_dir: Path | None) -> dict:
    """``jobs`` processes, each running every ``jobs``-th page with its own engines and database;
    their records merged back in corpus order. Each process still builds its engines once."""
    tmp = shard_dir or Path(tempfile.mkdtemp(prefix="ocr-eval-shards-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.evaluation",
                    *argv,
                    "--shard",
                    f"{k}/{jobs}",
                    "--shard-out",
                    str(tmp / f"{k}.json"),
                ]
            )
            for k in range(jobs)
        ]
        codes = [proc.wait() for proc in procs]
        if any(codes):
            raise RuntimeError(f"eval: a shard failed (exit codes {codes})")
        return merge_shards(tmp)
    finally:
        if shard_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)


def merge_shards(*folders: Path, order: list[str] | None = None) -> dict:
    """The shards' records in corpus order, each page once (a second set of processes may have
    taken the same pages last first); ``planned`` says how many the run meant to do."""
    parts = [json.loads(path.read_text()) for folder in folders for path in sorted(folder.glob("*.json"))]
    seen: dict[str, dict] = {}
    for part in parts:
        for r in part["records"]:
            seen.setdefault(r["id"], r)
    records = list(seen.values())
    # A shard cut short never wrote the corpus order: the caller's page list gives it.
    ids = order or next(part["order"] for part in parts if "order" in part)
    rank = {pid: i for i, pid in enumerate(ids)}
    records = [r for r in records if r["id"] in rank]
    records.sort(key=lambda r: rank[r["id"]])
    merged = dict(parts[0])
    merged["records"] = records
    merged["cpu_seconds"] = sum(part.get("cpu_seconds", 0) for part in parts)
    merged["planned"] = len(ids)
    merged["jobs"] = len(parts)
    return merged


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.evaluation", description=__doc__.split("\n\n")[0])
    parser.add_argument("--ci", action="store_true", help="the CI slice (each document's `ci` variants)")
    parser.add_argument("--only", default="", help="regular expression on page ids")
    parser.add_argument("--no-tesseract", action="store_true", help="leave Tesseract out (--tesseract none)")
    parser.add_argument(
        "--tesseract",
        choices=("all", "upright", "none"),
        default="all",
        help="which pages Tesseract reads beside ours: all, the upright ones (turn 0), none",
    )
    parser.add_argument("--shard-dir", type=Path, help="keep the --jobs processes' records here, page by page")
    parser.add_argument(
        "--merge-shards", type=Path, nargs="+", help="report from --shard-dir folders, finished or cut short"
    )
    parser.add_argument("--reverse", action="store_true", help="each process takes its pages last first")
    parser.add_argument("--gate", action="store_true", help="exit 1 when a gate fails")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="gate 3's per-class F1: a baseline JSON or a run JSON (default: bench/corpus/baseline-ci.json "
        "for the CI slice, the newest recorded full run for the whole corpus)",
    )
    parser.add_argument("--tolerance", type=float, default=None, help="gate 3's tolerance (default: the baseline's)")
    parser.add_argument("--record-baseline", action="store_true", help="write this run's per-class F1 as the baseline")
    parser.add_argument("--no-report", action="store_true", help="print only; write no report or run JSON")
    parser.add_argument("--list", action="store_true", help="list the pages and exit")
    parser.add_argument("--jobs", type=int, default=1, help="processes (each builds its engines once; default 1)")
    parser.add_argument("--report-from", type=Path, help="rewrite a recorded run's report (and gates) without running")
    parser.add_argument("--shard", default="", help=argparse.SUPPRESS)
    parser.add_argument("--shard-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.no_tesseract:
        args.tesseract = "none"
    if args.report_from:
        return _rewrite_report(args)
    docs = corpus.load()
    todo = list(corpus.pages(docs, ci=args.ci, only=args.only))
    if args.list:
        for page in todo:
            print(page.id, page.cls, f"expect {page.expected_rotation}")
        print(f"{len(todo)} pages from {len({p.doc.id for p in todo})} documents", file=sys.stderr)
        return 0
    if args.shard:
        k, n = (int(x) for x in args.shard.split("/"))
        mine = todo[k::n][::-1] if args.reverse else todo[k::n]
        _run_here(mine, tesseract=args.tesseract, label=f"shard {k}/{n} ", progress=args.shard_out)
        data = json.loads(args.shard_out.read_text())
        data["order"] = [p.id for p in todo]
        args.shard_out.write_text(json.dumps(data, ensure_ascii=False))
        return 0

    from bench import common

    started = dt.datetime.now(dt.UTC)
    if args.merge_shards:
        run = merge_shards(*args.merge_shards, order=[p.id for p in todo])
    elif args.jobs > 1:
        child_argv = [
            a for a in _strip_value(_strip_value(argv, "--jobs"), "--shard-dir") if not a.startswith("--jobs=")
        ]
        child_argv = [a for a in child_argv if a not in ("--gate", "--record-baseline", "--no-report")]
        run = _run_shards(child_argv, args.jobs, args.shard_dir)
    else:
        run = _run_here(todo, tesseract=args.tesseract)
    records = run["records"]
    meta = {
        "slice": "ci" if args.ci else "full",
        "only": args.only,
        "started": started.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "finished": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "commit": _commit(),
        "machine": common.machine(),
        "load_average": common.loadavg(),
        "jobs": run.get("jobs", args.jobs),
        "planned": run.get("planned", len(records)),
        "tesseract_mode": run.get("tesseract_mode", args.tesseract),
        "cpu_seconds": round(run["cpu_seconds"], 1),
        "ours_cpu_seconds": round(sum(r["cpu"] for r in records), 1),
        "tesseract_cpu_seconds": round(sum((r["tesseract"] or {}).get("cpu", 0) for r in records), 1),
        "tesseract": run["tesseract"],
        "tesseract_languages": run["tesseract_languages"],
        "engine": run["engine"],
        "pages": len(records),
        "documents": len({r["doc"] for r in records}),
        "sources": {d.source.name: vars(d.source) for d in docs},
    }

    baseline_path = None if args.only or args.record_baseline else (args.baseline or _default_baseline(args.ci))
    baseline, tolerance = None, args.tolerance
    if baseline_path is not None:
        baseline, recorded_tolerance = load_baseline(baseline_path)
        tolerance = tolerance if tolerance is not None else recorded_tolerance
    tolerance = tolerance if tolerance is not None else gates.DEFAULT_TOLERANCE
    verdict = gates.check(records, baseline, tolerance)
    meta["baseline"] = _show(baseline_path) if baseline is not None else None
    meta["tolerance"] = tolerance

    if not args.no_report:
        from bench.evaluation import report

        paths = report.write(records, meta, verdict, RESULTS)
        for path in paths:
            print(f"eval: wrote {path.relative_to(ROOT)}", file=sys.stderr)
    if args.record_baseline:
        target = args.baseline or BASELINE
        _write_baseline(target, records, meta, args.tolerance)
        print(f"eval: baseline written to {_show(target)}", file=sys.stderr)

    print(
        f"eval: {len(records)} pages, {meta['cpu_seconds']} CPU-s "
        f"(ours {meta['ours_cpu_seconds']}, Tesseract {meta['tesseract_cpu_seconds']})",
        file=sys.stderr,
    )
    for line in verdict.lines():
        print(f"eval: FAIL {line}", file=sys.stderr)
    if verdict.passed:
        print("eval: gates passed", file=sys.stderr)
    return 1 if args.gate and not verdict.passed else 0


def _strip_value(argv: list[str], flag: str) -> list[str]:
    """``argv`` without ``flag`` and its value (``--jobs 3``; ``--jobs=3`` is dropped by the caller)."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        else:
            out.append(a)
    return out


def _show(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _default_baseline(ci: bool) -> Path | None:
    """The CI slice: the committed baseline. The whole corpus: the newest recorded full run (a
    partial run has no comparable classes and checks no baseline)."""
    if ci:
        return BASELINE if BASELINE.exists() else None
    runs = sorted(RESULTS.glob("runs/*/eval.json"))
    return runs[-1] if runs else None


def load_baseline(path: Path) -> tuple[dict, float | None]:
    """Per-class F1 from a baseline JSON (``classes``) or from a run JSON (its ``pages``)."""
    data = json.loads(path.read_text())
    if "classes" in data:
        return data["classes"], data.get("tolerance")
    return gates.class_f1(data["pages"]), (data.get("meta") or {}).get("tolerance")


def _rewrite_report(args) -> int:
    """The report and gates of a recorded run, rebuilt from its JSON (after a change to the report,
    or to check it against another baseline); the run's pages are not run again. With ``--ci`` a
    whole-corpus run gives its CI-slice pages' report (and, with ``--record-baseline``, their
    baseline): the same pages through the same code."""
    from bench.evaluation import report

    data = json.loads(args.report_from.read_text())
    records, meta = data["pages"], data["meta"]
    for r in records:  # the size classes as defined now
        r["size"] = corpus.size_class(*(int(v) for v in r["pixels"].split("x")))
    if args.ci and meta["slice"] != "ci":
        wanted = {p.id for p in corpus.pages(corpus.load(), ci=True)}
        records = [r for r in records if r["id"] in wanted]
        meta = {**meta, "slice": "ci", "derived_from": _show(args.report_from), "pages": len(records)}
        meta["documents"] = len({r["doc"] for r in records})
        for key, field in (("ours_cpu_seconds", "cpu"),):
            meta[key] = round(sum(r[field] for r in records), 1)
        meta["tesseract_cpu_seconds"] = round(sum((r["tesseract"] or {}).get("cpu", 0) for r in records), 1)
        meta["cpu_seconds"] = round(meta["ours_cpu_seconds"] + meta["tesseract_cpu_seconds"], 1)
    ci = meta["slice"] == "ci"
    if args.record_baseline:
        target = args.baseline or BASELINE
        _write_baseline(target, records, meta, args.tolerance)
        print(f"eval: baseline written to {_show(target)}", file=sys.stderr)
        return 0
    baseline_path = None if meta["only"] else (args.baseline or _default_baseline(ci))
    if baseline_path is not None and baseline_path.resolve() == args.report_from.resolve():
        # A run is not its own baseline: the one recorded before it is.
        older = [p for p in sorted(RESULTS.glob("runs/*/eval.json")) if p.resolve() != args.report_from.resolve()]
        baseline_path = older[-1] if older and not ci else None
    baseline, tolerance = (None, None) if baseline_path is None else load_baseline(baseline_path)
    tolerance = args.tolerance if args.tolerance is not None else tolerance
    tolerance = tolerance if tolerance is not None else gates.DEFAULT_TOLERANCE
    verdict = gates.check(records, baseline, tolerance)
    meta["baseline"] = _show(baseline_path) if baseline is not None else None
    meta["tolerance"] = tolerance
    for path in report.write(records, meta, verdict, RESULTS):
        print(f"eval: wrote {_show(path)}", file=sys.stderr)
    for line in verdict.lines():
        print(f"eval: FAIL {line}", file=sys.stderr)
    return 1 if args.gate and not verdict.passed else 0


def _write_baseline(target: Path, records: list[dict], meta: dict, tolerance: float | None) -> None:
    target.write_text(
        json.dumps(
            {
                "recorded": meta["finished"],
                "commit": meta["commit"],
                "slice": meta["slice"],
                **({"derived_from": meta["derived_from"]} if meta.get("derived_from") else {}),
                "tolerance": tolerance if tolerance is not None else gates.DEFAULT_TOLERANCE,
                "classes": gates.class_f1(records),
            },
            indent=1,
            ensure_ascii=False,
        )
        + "\n"
    )
