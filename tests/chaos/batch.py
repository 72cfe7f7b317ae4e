"""A batch from a bucket prefix, with faults: ``python -m tests.chaos.batch [--docs 2000]``.

Part of ``make test-chaos`` (the CI size, 2,000 documents) and the 100,000-document run by hand
(``--docs 100000 --kills 20 --redis-restart``; docs/big-documents.md). The stack is the chaos
harness's own (tests/chaos/stack.py: Redis and PostgreSQL of its own on free ports, gunicorn,
one worker per online queue, beat with a 5 s sweep) plus a bulk worker at nice 19 and moto's S3
server as the deployment's storage: the documents are generated born-digital PDFs of 1-3 pages,
each page carrying its document's unique marker, put under a prefix the tenant may read. One
batch over that prefix; meanwhile the bulk worker is SIGKILLed ``--kills`` times (and started
again, as a supervisor would) and, with ``--redis-restart``, Redis is killed and started empty.

Passes when: every document is in the manifest once, done or failed with a code; each marker is
found in its own document's result once per page and in no other; pages in = done + failed; no
page or job recognised twice. Figures in tests/artifacts/chaos/batch-report.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import resource
import signal
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import boto3
import psycopg
import pymupdf
import requests
from moto.server import ThreadedMotoServer

from bench.common import tree_cpu_seconds
from tests.chaos.plan import ARTIFACTS
from tests.chaos.stack import Stack, free_port

BUCKET = "chaos-archive"
PREFIX = "archives/chaos/"
MARKER = re.compile(r"MK\d{6}Q[0-9a-f]{4}")
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "chaos", "AWS_SECRET_ACCESS_KEY": "chaos-secret", "AWS_S3_REGION_NAME": "us-east-1"}


def document(index: int, rng: random.Random) -> tuple[str, int, bytes]:
    marker = f"MK{index:06d}Q{rng.getrandbits(16):04x}"
    pages = 1 + index % 3
    doc = pymupdf.open()
    for i in range(pages):
        page = doc.new_page()
        page.insert_text((72, 72), f"Archive record {marker} page {i + 1} of {pages}.", fontsize=11)
        page.insert_text((72, 96), "Born-digital text long enough for the text layer to be read directly.", fontsize=11)
    return marker, pages, doc.tobytes()


class BatchStack(Stack):
    def __init__(self, s3_endpoint: str, nice: int = 19, concurrency: int = 2) -> None:
        super().__init__(hosts=0)
        self.nice = nice
        self.concurrency = concurrency
        self.WORKERS = (*Stack.WORKERS, ("bulk", concurrency))
        self.env.update(
            {
                "OCR_STORAGE": "s3",
                "AWS_STORAGE_BUCKET_NAME": BUCKET,
                "AWS_S3_ENDPOINT_URL": s3_endpoint,
                **CREDENTIALS,
                "OCR_BATCH_POLL_SECONDS": "1",
                "OCR_BATCH_EXPAND_CHUNK": "500",
                "OCR_BATCH_WINDOW": "1000",
            }
        )

    def start_worker(self, queue_name: str, concurrency: int) -> None:
        if queue_name != "bulk":
            super().start_worker(queue_name, concurrency)
            return
        cmd = ["nice", "-n", str(self.nice), sys.executable, "-m", "celery", "-A", "ocrsite", "worker", "-Q", "bulk"]
        cmd += ["-n", "bulk@chaos", "--concurrency", str(concurrency), "--loglevel", "INFO"]
        self.spawn("bulk", cmd)


def put_documents(endpoint: str, n: int, seed: int) -> dict[str, tuple[str, int]]:
    """n documents under PREFIX: key -> (marker, pages)."""
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=CREDENTIALS["AWS_S3_REGION_NAME"],
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    )
    s3.create_bucket(Bucket=BUCKET)
    rng = random.Random(seed)
    made = [(f"{PREFIX}{i:07d}.pdf", *document(i, rng)) for i in range(n)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda m: s3.put_object(Bucket=BUCKET, Key=m[0], Body=m[3]), made))
    return {key: (marker, pages) for key, marker, pages, _ in made}


def run(
    docs: int, kills: int, redis_restart: bool, seed: int, timeout_s: float, nice: int = 19, concurrency: int = 2
) -> dict:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request
    s3_port = free_port()
    s3_server = ThreadedMotoServer(ip_address="127.0.0.1", port=s3_port, verbose=False)
    s3_server.start()
    endpoint = f"http://127.0.0.1:{s3_port}"
    t0 = time.monotonic()
    expected = put_documents(endpoint, docs, seed)
    put_s = time.monotonic() - t0
    stack = BatchStack(endpoint, nice, concurrency)
    faults: list[dict] = []
    stop = threading.Event()
    try:
        stack.start()
        stack.manage(
            "shell",
            "-c",
            f"from apps.api.models import Tenant; Tenant.objects.create(slug='chaos', batch_prefixes='{PREFIX}')",
        )
        key = stack.manage("create_api_key", "chaos").splitlines()[-1]
        http = requests.Session()
        http.headers["X-API-Key"] = key
        base = f"http://127.0.0.1:{stack.web_port}"
        started = time.monotonic()
        resp = http.post(f"{base}/api/v1/batches", json={"prefix": PREFIX}, timeout=60)
        resp.raise_for_status()
        batch_id = resp.json()["id"]
        fault = threading.Thread(target=_faults, args=(stack, kills, redis_restart, stop, faults, seed), daemon=True)
        fault.start()
        body = {}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                resp = http.get(f"{base}/api/v1/batches/{batch_id}", timeout=30)
                # A 503 (busy:unavailable while Redis is down or just back) says the batch's state
                # is unknown, not that it ended: a 20,000-document run stopped polling there.
                resp.raise_for_status()
                body = resp.json()
            except (requests.RequestException, ValueError):
                time.sleep(2)
                continue
            if body.get("status") != "running":
                break
            time.sleep(2)
        stop.set()
        fault.join(60)
        run_s = time.monotonic() - started
        problems = check(http, base, batch_id, body, expected)
        timeline = _timeline(stack.database_url)
        cpu = _cpu_by_process(stack)
        twice = _recognised_twice(stack.database_url)
        if twice:
            problems.append(f"{twice} pages recognised twice")
        report = {
            "docs": docs,
            "pages": sum(p for _, p in expected.values()),
            "put_s": round(put_s, 1),
            "batch_s": round(run_s, 1),
            "status": body.get("status"),
            "progress": body.get("progress"),
            "timeline": timeline,
            "cpu_s": cpu,
            "faults": faults,
            "problems": problems[:50],
            "problem_count": len(problems),
        }
    finally:
        stop.set()
        stack.stop()
        s3_server.stop()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "batch-report.json").write_text(json.dumps(report, indent=2))
    return report


def check(http: requests.Session, base: str, batch_id: str, body: dict, expected: dict) -> list[str]:
    problems: list[str] = []
    if body.get("status") != "done":
        return [f"batch ended {body.get('status')!r}: {body.get('progress')}"]
    progress = body["progress"]
    if progress["pages_in"] != progress["pages_done"] + progress["pages_failed"]:
        problems.append(f"pages in {progress['pages_in']} != done + failed ({progress})")
    lines = [
        json.loads(x) for x in http.get(f"{base}/api/v1/batches/{batch_id}/manifest", timeout=300).text.splitlines()
    ]
    items = Counter(line["item"] for line in lines)
    if set(items) != set(expected) or any(n != 1 for n in items.values()):
        problems.append(
            f"manifest: {len(items)} items for {len(expected)} documents, repeats {sum(items.values()) - len(items)}"
        )
    seen: Counter = Counter()

    def read(line: dict) -> tuple[dict, str]:
        if line["status"] != "done":
            return line, ""
        return line, http.get(f"{base}/api/v1/jobs/{line['job']}/result?format=markdown", timeout=60).text

    with ThreadPoolExecutor(8) as pool:
        for line, text in pool.map(read, lines):
            if line["status"] != "done":
                if not line.get("error"):
                    problems.append(f"{line['item']}: {line['status']} without a code")
                continue
            marker, pages = expected.get(line["item"], ("?", 0))
            found = Counter(MARKER.findall(text))
            seen.update(found.keys())
            if found.get(marker) != pages or set(found) != {marker}:
                problems.append(f"{line['item']}: markers {dict(found)}, wanted {marker} × {pages}")
    if repeated := [m for m, n in seen.items() if n > 1]:
        problems.append(f"{len(repeated)} markers in more than one result")
    return problems


def _faults(stack: Stack, kills: int, redis_restart: bool, stop: threading.Event, log: list, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(kills):
        if stop.wait(rng.uniform(5, 15)):
            return
        proc = stack.procs.get("bulk")
        if proc is None or proc.poll() is not None:
            continue
        os.killpg(proc.pid, signal.SIGKILL)  # the whole worker: its claims go stale, the sweep re-sends
        proc.wait()
        log.append({"kill": i + 1, "at": time.strftime("%H:%M:%S")})
        stack.start_worker("bulk", stack.concurrency)
        if redis_restart and i == kills // 2:
            stack.kill_redis()
            time.sleep(5)
            stack.start_redis()
            log.append({"redis_restart": True, "at": time.strftime("%H:%M:%S")})


def _timeline(database_url: str) -> dict:
    """Where the batch's time went: when its jobs were made (the expansion), started (ingest) and
    finished, in seconds from the first job made, and a job's mean wait and run."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM max(created_at) - min(created_at)),"
            " extract(epoch FROM min(started_at) - min(created_at)),"
            " extract(epoch FROM max(finished_at) - min(created_at)),"
            " extract(epoch FROM avg(started_at - created_at)), extract(epoch FROM avg(finished_at - started_at))"
            " FROM jobs_job WHERE batch_id IS NOT NULL"
        ).fetchone()
    names = ("last_made_s", "first_started_s", "last_finished_s", "mean_wait_s", "mean_run_s")
    return {name: round(float(v), 1) if v is not None else None for name, v in zip(names, row, strict=True)}


def _cpu_by_process(stack: Stack) -> dict[str, float]:
    """CPU-seconds each part of the stack has spent so far, its children included (the workers'
    pool processes, PostgreSQL's backends), and this harness's own (moto's S3 server, the
    documents' generation and puts, the poller). A bulk worker killed mid-run takes its figure
    with it: the report counts the one running at the end."""
    pids = {name: proc.pid for name, proc in stack.procs.items()}
    if stack.redis is not None:
        pids["redis"] = stack.redis.pid
    if stack.postgres.proc is not None:
        pids["postgres"] = stack.postgres.proc.pid
    out = {name: round(tree_cpu_seconds(pid), 1) for name, pid in pids.items()}
    own = resource.getrusage(resource.RUSAGE_SELF)
    out["harness"] = round(own.ru_utime + own.ru_stime, 1)
    return out


def _recognised_twice(database_url: str) -> int:
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT count(*) FROM (SELECT page_id FROM jobs_stageevent WHERE stage = 'recognize' AND outcome = 'ok'"
            " AND page_id IS NOT NULL GROUP BY page_id HAVING count(*) > 1) twice"
        ).fetchone()[0]


def main() -> int:
    parser = argparse.ArgumentParser(prog="tests.chaos.batch")
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--kills", type=int, default=1, help="SIGKILLs of the bulk worker during the batch")
    parser.add_argument("--redis-restart", action="store_true", help="kill Redis once mid-batch, restart it empty")
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument(
        "--nice",
        type=int,
        default=19,
        help="the bulk worker's nice level (19 as deployed; 0 on a machine shared with others)",
    )
    parser.add_argument("--concurrency", type=int, default=2, help="the bulk worker's processes")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds the batch may take")
    args = parser.parse_args()
    report = run(args.docs, args.kills, args.redis_restart, args.seed, args.timeout, args.nice, args.concurrency)
    print(json.dumps({k: v for k, v in report.items() if k != "problems"}, indent=2))
    for problem in report["problems"]:
        print("PROBLEM", problem, file=sys.stderr)
    return 1 if report["problem_count"] else 0


if __name__ == "__main__":
    sys.exit(main())
