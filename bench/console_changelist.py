"""Operators' console at scale: server time and queries per admin request with 100k jobs and
1M regions, seeded with bulk_create into a dedicated PostgreSQL database.

    python -m bench.console_changelist [--db NAME] [--reseed] [--repeat N]

Requests run in-process through Django's test client (the full middleware and admin stack, no
network), as a superuser, each repeated N times after one warm-up; the median is reported with
the number of SQL queries. The goal is at most 300 ms per page. Results also go to
bench/results/console_changelist.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

DEFAULT_DB = "ocr_console_bench"
JOBS = 100_000
REGIONS = 1_000_000
BATCH = 5_000
GOAL_MS = 300


def _database_url(name: str) -> str:
    base = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
    return f"{base.rstrip('/')}/{name}"


def _ensure_database(name: str) -> None:
    import psycopg

    with psycopg.connect(_database_url("postgres"), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def _setup(name: str) -> None:
    _ensure_database(name)
    os.environ["DATABASE_URL"] = _database_url(name)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ocrsite.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def seed(reseed: bool = False) -> dict:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from apps.jobs.models import Job, Page, Region, StageEvent

    if not reseed and Job.objects.count() >= JOBS and Region.objects.count() >= REGIONS:
        return {"seeded": False}
    t0 = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute("TRUNCATE jobs_region, jobs_stageevent, jobs_page, jobs_job CASCADE")
    User = get_user_model()
    owners = [User.objects.get_or_create(username=f"tenant-user-{i}")[0] for i in range(20)]
    rng = random.Random(4)
    now = datetime.now(UTC)
    statuses = ["done"] * 80 + ["failed"] * 8 + ["cancelled"] * 2 + ["running"] * 5 + ["queued"] * 5
    codes = ["engine:injected-fault", "input:corrupt", "engine:timeout", "page:no-image", "vllm:overloaded"]
    engines = ["cpu"] * 6 + ["gpu"] * 3 + ["vlm-page"]

    def jobs():
        for i in range(JOBS):
            status = rng.choice(statuses)
            created = now - timedelta(seconds=rng.uniform(0, 90 * 86400))
            started = created + timedelta(seconds=rng.uniform(0.1, 30)) if status != "queued" else None
            finished = (
                started + timedelta(seconds=rng.uniform(1, 600))
                if started and status in ("done", "failed", "cancelled")
                else None
            )
            pages = rng.randint(1, 20)
            owner = rng.choice(owners)
            code = rng.choice(codes) if status == "failed" else ""
            yield Job(
                owner=owner,
                tenant=owner.username,
                status=status,
                engine=rng.choice(engines),
                filename=f"invoice-{i:06d}-{rng.choice(['scan', 'report', 'contract', 'letter'])}.pdf",
                source=f"sources/bench-{i}.pdf",
                kind="pdf",
                sha256=hashlib.sha256(str(i).encode()).hexdigest(),
                size_bytes=rng.randint(10_000, 9_000_000),
                page_count=pages,
                pages_done=pages if status == "done" else rng.randint(0, pages),
                pages_failed=1 if status == "failed" else 0,
                error_code=code,
                error_message=f"{code}: seeded" if code else "",
                created_at=created,
                started_at=started,
                finished_at=finished,
            )

    _bulk(Job, jobs())
    # created_at is auto_now_add: bulk_create overwrote the spread dates; put them back in SQL.
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE jobs_job SET created_at = COALESCE(started_at, now()) - (random() * interval '30 seconds') "
            "WHERE started_at IS NOT NULL"
        )
        cur.execute("UPDATE jobs_job SET created_at = now() - (random() * interval '90 days') WHERE started_at IS NULL")
    # 100k pages (10 regions each on average) on the newest jobs; one page with exactly 50 regions.
    job_ids = list(Job.objects.order_by("-created_at").values_list("pk", flat=True)[:100_000])
    _bulk(
        Page,
        (
            Page(job_id=jid, index=0, status="done", width=1654, height=2339, dpi=200, image=f"pages/{jid}/00000.png")
            for jid in job_ids
        ),
    )
    page_ids = list(Page.objects.order_by("pk").values_list("pk", flat=True))
    showcase = page_ids[0]
    labels = ["text", "title", "table", "figure", "header", "footer", "list"]

    def regions():
        yield from (_region(showcase, n, rng, labels) for n in range(50))
        left = REGIONS - 50
        for pid in page_ids[1:]:
            for n in range(min(10, left)):
                yield _region(pid, n, rng, labels)
            left -= min(10, left)
            if left <= 0:
                break

    _bulk(Region, regions(), batch=10_000)
    showcase_job = Page.objects.get(pk=showcase).job_id
    start = now - timedelta(minutes=5)
    _bulk(
        StageEvent,
        (
            StageEvent(
                job_id=showcase_job,
                page_id=showcase if s != "ingest" else None,
                stage=s,
                worker="bench:1",
                started_at=start + timedelta(seconds=i),
                finished_at=start + timedelta(seconds=i + 1),
                duration_ms=1000,
            )
            for i, s in enumerate(["ingest", "layout", "recognize", "assemble"])
        ),
    )
    with connection.cursor() as cur:
        cur.execute("ANALYZE")
    return {"seeded": True, "seed_s": round(time.perf_counter() - t0, 1)}


def _region(page_id: int, n: int, rng: random.Random, labels: list[str]):
    from apps.jobs.models import Region

    y = 80 + n * 40
    return Region(
        page_id=page_id,
        order=n,
        label=rng.choice(labels),
        x0=100,
        y0=y,
        x1=1500,
        y1=y + 36,
        text=f"line {n} of seeded text " * 3,
        confidence=rng.uniform(0.4, 1.0),
        status="done",
        engine="rapidocr",
        flags=["low-confidence"] if n % 17 == 0 else [],
    )


def _bulk(model, objects, batch: int = BATCH) -> None:
    chunk = []
    for obj in objects:
        chunk.append(obj)
        if len(chunk) >= batch:
            model.objects.bulk_create(chunk, batch_size=batch)
            chunk = []
    if chunk:
        model.objects.bulk_create(chunk, batch_size=batch)


def measure(repeat: int) -> list[dict]:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from apps.jobs.models import Job, Page

    settings.METRICS_CACHE_SECONDS = 0  # measure the scrape's queries, not the per-process cache
    admin, _ = get_user_model().objects.get_or_create(
        username="bench-admin", defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client(REMOTE_ADDR="127.0.0.1")
    client.force_login(admin)
    changelist = reverse("admin:jobs_job_changelist")
    showcase = Page.objects.order_by("pk").first()
    sample = Job.objects.filter(status="failed").order_by("-created_at").first()
    owner_id = Job.objects.exclude(owner=None).values_list("owner_id", flat=True).first()
    today = datetime.now(UTC).date()
    week_ago = today - timedelta(days=7)
    tz = "%2B00:00"  # the filter's own links carry an aware midnight
    cases = [
        ("changelist, no filter", changelist),
        ("changelist, page 200", f"{changelist}?p=199"),
        ("status=failed", f"{changelist}?status__exact=failed"),
        ("has error", f"{changelist}?has_error=yes"),
        ("owner", f"{changelist}?owner__id__exact={owner_id}"),
        ("engine=gpu", f"{changelist}?engine__exact=gpu"),
        (
            "created past 7 days",
            f"{changelist}?created_at__gte={week_ago}+00:00:00{tz}&created_at__lt={today + timedelta(days=1)}+00:00:00{tz}",
        ),
        ("date hierarchy month", f"{changelist}?created_at__year={today.year}&created_at__month={today.month}"),
        (
            "status=failed + engine=cpu + owner",
            f"{changelist}?status__exact=failed&engine__exact=cpu&owner__id__exact={owner_id}",
        ),
        ("search filename", f"{changelist}?q=contract"),
        ("search sha256", f"{changelist}?q={sample.sha256}"),
        ("search id", f"{changelist}?q={sample.pk}"),
        ("sort by duration", f"{changelist}?o=-7"),
        ("job page", reverse("admin:jobs_job_change", args=[showcase.job_id])),
        ("page view, 50 regions", reverse("admin:jobs_job_page", args=[showcase.job_id, showcase.index])),
        ("admin index dashboard", reverse("admin:index")),
        ("/metrics", "/metrics"),
    ]
    rows = []
    for name, url in cases:
        resp = client.get(url)  # warm-up (and a check that it renders)
        if resp.status_code != 200:
            raise SystemExit(f"{name}: {url} answered {resp.status_code}")
        times, queries = [], 0
        for _ in range(repeat):
            with CaptureQueriesContext(connection) as ctx:
                t0 = time.perf_counter()
                client.get(url)
                times.append((time.perf_counter() - t0) * 1000)
            queries = len(ctx.captured_queries)
        rows.append(
            {
                "request": name,
                "url": url,
                "median_ms": round(statistics.median(times), 1),
                "max_ms": round(max(times), 1),
                "queries": queries,
            }
        )
    with connection.cursor() as cur:
        t0 = time.perf_counter()
        cur.execute("SELECT COUNT(*) FROM jobs_job")
        cur.fetchone()
        rows.append(
            {
                "request": "(reference) SELECT COUNT(*) FROM jobs_job",
                "url": "",
                "median_ms": round((time.perf_counter() - t0) * 1000, 1),
                "max_ms": None,
                "queries": 1,
            }
        )
    return rows


def run(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench.console_changelist", description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=DEFAULT_DB)
    parser.add_argument("--reseed", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    _setup(args.db)
    from apps.jobs.models import Job, Region

    info = seed(args.reseed)
    rows = measure(args.repeat)
    print(
        f"console changelist — {Job.objects.count():,} jobs, {Region.objects.count():,} regions; "
        f"{platform.node()} ({os.cpu_count()} CPUs), {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; "
        f"median of {args.repeat} after a warm-up; goal <= {GOAL_MS} ms"
    )
    if info.get("seeded"):
        print(f"seeded in {info['seed_s']} s")
    print(f"{'request':42s} {'median ms':>10s} {'max ms':>8s} {'queries':>8s}")
    for r in rows:
        flag = "" if r["url"] == "" or r["median_ms"] <= GOAL_MS else "  over goal"
        print(
            f"{r['request']:42s} {r['median_ms']:>10} {r['max_ms'] if r['max_ms'] is not None else '':>8} "
            f"{r['queries']:>8}{flag}"
        )
    out = Path(__file__).resolve().parent / "results" / "console_changelist.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"date": datetime.now(UTC).isoformat(), "cpus": os.cpu_count(), **info, "rows": rows}, indent=2)
    )


if __name__ == "__main__":
    run(sys.argv[1:])
