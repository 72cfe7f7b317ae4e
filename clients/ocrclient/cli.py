"""``ocr``: submit files or folders, watch one progress bar, collect results; status/result/cancel/ls.

Batches are resumable. ``submit DIR -o OUT`` keeps ``OUT/.ocr-jobs.json`` (file → sha256, job id),
written after every submission, and each result is written atomically. A re-run skips files
whose result is already in OUT and waits on jobs it recorded instead of submitting again; a file
is also submitted with an Idempotency-Key derived from its content, so even a submission whose
record was lost is answered with the earlier job rather than a second one.

Exit codes: 0 all done · 1 some job failed or was cancelled · 2 usage (bad path, bad flag) ·
3 the API refused (auth, input, not found...) or cannot be reached · 4 timed out waiting · 130 interrupted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ocrclient.client import Client, write_atomic
from ocrclient.errors import ApiError, OcrError
from ocrclient.models import Job

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_API, EXIT_TIMEOUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
SUFFIXES = {".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp"}
MANIFEST = ".ocr-jobs.json"
EXT = {"md": ".md", "json": ".json"}
API_FORMAT = {"md": "markdown", "json": "json"}

err = Console(stderr=True)


class UsageError(Exception):
    pass


@dataclass
class Item:
    path: Path
    rel: str
    sha256: str = ""
    job_id: str = ""
    job: Job | None = None
    state: str = "pending"  # pending → submitted → done | failed | skipped


@dataclass
class Manifest:
    path: Path | None
    entries: dict[str, dict] = field(default_factory=dict)

    @classmethod
    def load(cls, outdir: Path | None) -> Manifest:
        if outdir is None:
            return cls(None)
        path = outdir / MANIFEST
        try:
            return cls(path, json.loads(path.read_text()))
        except FileNotFoundError:
            return cls(path)
        except ValueError as exc:
            raise UsageError(f"{path} is not valid JSON ({exc}); move it away to start over") from exc

    def record(self, item: Item) -> None:
        if self.path is None:
            return
        self.entries[item.rel] = {"sha256": item.sha256, "job_id": item.job_id}
        write_atomic(self.path, json.dumps(self.entries, indent=1, sort_keys=True).encode())


def collect(paths: list[str]) -> list[Item]:
    items: list[Item] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for child in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES):
                items.append(Item(child, child.relative_to(path).as_posix()))
        elif path.is_file():
            items.append(Item(path, path.name))
        else:
            raise UsageError(f"{raw}: no such file or directory")
    seen: set[str] = set()
    for item in items:
        if item.rel in seen:
            raise UsageError(f"two inputs would write the same result: {item.rel}")
        seen.add(item.rel)
    return items


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def cmd_submit(client: Client, args: argparse.Namespace) -> int:
    outdir = Path(args.output) if args.output else None
    wait = args.wait or outdir is not None
    items = collect(args.paths)
    if not items:
        raise UsageError("no PDF or image files found")
    manifest = Manifest.load(outdir)
    for item in items:
        if outdir and (outdir / (item.rel + EXT[args.format])).exists():
            item.state = "skipped"
            continue
        item.sha256 = _sha256(item.path)
        earlier = manifest.entries.get(item.rel, {})
        if earlier.get("job_id") and earlier.get("sha256") == item.sha256:
            item.job_id, item.state = earlier["job_id"], "submitted"
            continue
        job = client.submit(item.path, engine=args.engine, ocr=args.ocr, idempotency_key=f"ocr-cli-{item.sha256}")
        item.job_id, item.job, item.state = job.id, job, "submitted"
        manifest.record(item)
        if not wait:
            print(f"{job.id}\t{item.rel}")
    skipped = sum(1 for i in items if i.state == "skipped")
    if skipped:
        err.print(f"{skipped} file(s) already have a result in {outdir}: skipped")
    if not wait:
        return EXIT_OK
    return _wait_all(client, items, outdir, args)


def _wait_all(client: Client, items: list[Item], outdir: Path | None, args: argparse.Namespace) -> int:
    pending = [i for i in items if i.state == "submitted"]
    deadline = time.monotonic() + args.timeout
    columns = (TextColumn("pages"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"))
    with Progress(*columns, TimeElapsedColumn(), console=err, disable=args.quiet) as bar:
        task = bar.add_task("", total=None)
        while pending:
            for item in list(pending):
                item.job = client.get(item.job_id)
                if item.job.finished:
                    _finish(client, item, outdir, args.format)
                    pending.remove(item)
            jobs = [i.job for i in items if i.job]
            total = sum(j.progress.pages_total for j in jobs) or None
            done = sum(j.progress.pages_done + j.progress.pages_failed for j in jobs)
            finished = sum(1 for i in items if i.state in ("done", "failed", "skipped"))
            bar.update(task, total=total, completed=done, description=f"{finished}/{len(items)} files")
            if pending and time.monotonic() > deadline:
                err.print(f"timed out after {args.timeout:g} s; {len(pending)} job(s) still running (re-run to resume)")
                return EXIT_TIMEOUT
            if pending:
                time.sleep(args.poll)
    failed = [i for i in items if i.state == "failed"]
    for item in failed:
        error = item.job.error if item.job else None
        err.print(f"[red]failed[/red] {item.rel}: {error.code + ' ' + error.message if error else item.job.status}")
    return EXIT_FAILED if failed else EXIT_OK


def _finish(client: Client, item: Item, outdir: Path | None, fmt: str) -> None:
    job = item.job
    assert job is not None
    if job.status != "done":
        item.state = "failed"
        return
    if outdir is not None:
        client.save(job.id, outdir / (item.rel + EXT[fmt]), API_FORMAT[fmt])
    else:
        print(f"{job.id}\t{item.rel}\tdone")
    item.state = "done"


def cmd_status(client: Client, args: argparse.Namespace) -> int:
    job = client.get(args.job_id)
    print(json.dumps(_job_dict(job), indent=1))
    return EXIT_FAILED if job.status in ("failed", "cancelled") else EXIT_OK


def cmd_result(client: Client, args: argparse.Namespace) -> int:
    if args.output:
        client.save(args.job_id, args.output, API_FORMAT[args.format])
        return EXIT_OK
    if args.format == "md":
        sys.stdout.write(client.markdown(args.job_id))
    else:
        print(json.dumps(client.document(args.job_id).raw, ensure_ascii=False, indent=1))
    return EXIT_OK


def cmd_cancel(client: Client, args: argparse.Namespace) -> int:
    job = client.cancel(args.job_id)
    print(f"{job.id}\t{job.status}")
    return EXIT_OK


def cmd_ls(client: Client, args: argparse.Namespace) -> int:
    for job in client.list(status=args.status, limit=args.limit):
        p = job.progress
        code = job.error.code if job.error else ""
        print(f"{job.id}\t{job.status}\t{p.pages_done}/{p.pages_total}\t{job.filename}\t{code}".rstrip())
    return EXIT_OK


def cmd_batch(client: Client, args: argparse.Namespace) -> int:
    """Start a batch (or follow one with --follow ID) with a progress bar; the manifest at the end."""
    if args.follow:
        batch = client.get_batch(args.follow)
    else:
        given = [x for x in (args.prefix, args.keys, args.uploads) if x]
        if len(given) != 1:
            raise UsageError("give exactly one of --prefix, --keys FILE or --uploads FILE")
        lines = lambda path: [ln.strip() for ln in Path(path).read_text().splitlines() if ln.strip()]  # noqa: E731
        batch = client.batch(
            prefix=args.prefix,
            keys=lines(args.keys) if args.keys else None,
            uploads=lines(args.uploads) if args.uploads else None,
            engine=args.engine,
            ocr=args.ocr,
            pages=args.pages,
        )
        err.print(f"batch {batch.id} started")
    if args.no_wait:
        print(batch.id)
        return EXIT_OK
    deadline = time.monotonic() + args.timeout
    columns = (TextColumn("pages"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"))
    with Progress(*columns, TimeElapsedColumn(), console=err, disable=args.quiet) as bar:
        task = bar.add_task("", total=None)
        while True:
            p = batch.progress
            jobs = p.get("jobs", {})
            ended = sum(jobs.get(s, 0) for s in ("done", "failed", "cancelled"))
            more = "" if p.get("expanded") else "+"
            bar.update(
                task,
                total=p.get("pages_in") or None,
                completed=p.get("pages_done", 0) + p.get("pages_failed", 0),
                description=f"{ended}/{p.get('items', 0)}{more} documents, {jobs.get('failed', 0)} failed",
            )
            if batch.finished:
                break
            if time.monotonic() > deadline:
                err.print(f"timed out after {args.timeout:g} s; follow it with: ocr batch --follow {batch.id}")
                return EXIT_TIMEOUT
            time.sleep(args.poll)
            batch = client.get_batch(batch.id)
    manifest = client.batch_manifest(batch.id)
    if args.output:
        write_atomic(Path(args.output), "".join(json.dumps(line) + "\n" for line in manifest).encode())
    else:
        for line in manifest:
            print(json.dumps(line))
    failed = [line for line in manifest if line["status"] != "done"]
    return EXIT_FAILED if failed or batch.status != "done" else EXIT_OK


def cmd_batch_cancel(client: Client, args: argparse.Namespace) -> int:
    batch = client.cancel_batch(args.batch_id)
    print(f"{batch.id}\t{batch.status}")
    return EXIT_OK


def _job_dict(job: Job) -> dict:
    return {
        "id": job.id,
        "status": job.status,
        "filename": job.filename,
        "progress": vars(job.progress),
        "error": vars(job.error) if job.error else None,
        "created_at": job.created_at,
        "finished_at": job.finished_at,
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ocr", description="OCR platform client (OCR_BASE_URL, OCR_API_KEY or OCR_TOKEN)")
    p.add_argument("--base-url", help="default: $OCR_BASE_URL or http://127.0.0.1:8000")
    p.add_argument("--api-key", help="default: $OCR_API_KEY")
    p.add_argument("--token", help="an OIDC bearer token instead of an API key (default: $OCR_TOKEN)")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("submit", help="submit files or folders (resumable with -o)")
    s.add_argument("paths", nargs="+", metavar="FILE|DIR")
    s.add_argument("--wait", action="store_true", help="wait for the jobs (implied by -o)")
    s.add_argument("-o", "--output", metavar="OUTDIR", help="write each result here, mirroring the input tree")
    s.add_argument("--format", choices=sorted(EXT), default="md")
    s.add_argument("--engine", choices=["cpu", "gpu", "vlm-page"])
    s.add_argument("--ocr", choices=["auto", "force"])
    s.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait in all (default 3600)")
    s.add_argument("--poll", type=float, default=1.0, help=argparse.SUPPRESS)
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_submit)

    s = sub.add_parser("status", help="a job's status and progress as JSON (exit 1 if failed/cancelled)")
    s.add_argument("job_id")
    s.set_defaults(func=cmd_status)

    s = sub.add_parser("result", help="a finished job's result")
    s.add_argument("job_id")
    s.add_argument("--format", choices=sorted(EXT), default="md")
    s.add_argument("-o", "--output", metavar="FILE")
    s.set_defaults(func=cmd_result)

    s = sub.add_parser("cancel", help="cancel a queued or running job")
    s.add_argument("job_id")
    s.set_defaults(func=cmd_cancel)

    s = sub.add_parser("batch", help="start a batch on the bulk lane (or --follow one) with a progress bar")
    s.add_argument("--prefix", help="every object under this key prefix of the platform's storage")
    s.add_argument("--keys", metavar="FILE", help="a file of object keys, one a line")
    s.add_argument("--uploads", metavar="FILE", help="a file of direct-upload ids, one a line")
    s.add_argument("--follow", metavar="BATCH_ID", help="follow a batch already started")
    s.add_argument("--engine", choices=["cpu", "gpu", "vlm-page"])
    s.add_argument("--ocr", choices=["auto", "force"])
    s.add_argument("--pages", help="only these pages of each document, e.g. 1-3")
    s.add_argument("-o", "--output", metavar="FILE", help="write the JSONL manifest here (default: stdout)")
    s.add_argument("--no-wait", action="store_true", help="print the batch id and return")
    s.add_argument("--timeout", type=float, default=7 * 24 * 3600.0)
    s.add_argument("--poll", type=float, default=5.0, help=argparse.SUPPRESS)
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_batch)

    s = sub.add_parser("batch-cancel", help="cancel a running batch and its unfinished jobs")
    s.add_argument("batch_id")
    s.set_defaults(func=cmd_batch_cancel)

    s = sub.add_parser("ls", help="list jobs, newest first")
    s.add_argument("--status", help="comma-separated: queued,running,assembling,done,failed,cancelled")
    s.add_argument("--limit", type=int, default=50)
    s.set_defaults(func=cmd_ls)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        with Client(args.base_url, api_key=args.api_key, token=args.token) as client:
            return args.func(client, args)
    except UsageError as exc:
        err.print(f"ocr: {exc}")
        return EXIT_USAGE
    except ApiError as exc:
        err.print(f"ocr: {exc}")
        return EXIT_API
    except (OcrError, httpx.HTTPError) as exc:
        err.print(f"ocr: {type(exc).__name__}: {exc}")
        return EXIT_API
    except KeyboardInterrupt:
        err.print("ocr: interrupted; re-run the same command to resume")
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
