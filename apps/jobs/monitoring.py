"""What the pipeline is doing, read from the database and the broker: the admin dashboard and
the Prometheus collector behind /metrics both ask here.

Workers are separate processes (separate pods in the cluster), so counters kept in their memory
would be lost on restart and would need a shared multiprocess directory the web pods cannot see.
The database already holds every job, page and stage event, so the collector computes counters
and stage-duration histograms from it at scrape time: the same numbers whichever web process is
scraped, and they survive restarts. Queue depth comes from Redis list lengths, which is what
KEDA scales on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from urllib.parse import urlparse

import redis
from django.conf import settings
from django.db.models import BooleanField, Count, ExpressionWrapper, Min, Q, Sum
from django.utils import timezone
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from apps.jobs.models import Job, Page, StageEvent
from apps.jobs.states import JOB_WAITS_FOR, PAGE_WAITS_FOR
from ocrsite.vocabulary import PageFlag, Queue

log = logging.getLogger(__name__)

QUEUES = tuple(q.value for q in Queue)
# kombu's Redis transport keeps a list per priority step: "<queue>" for 0, "<queue>\x06\x16<n>" above.
_PRIORITY_SEP = "\x06\x16"
_PRIORITY_STEPS = (3, 6, 9)
STAGE_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

_redis_clients: dict[str, redis.Redis] = {}


def _broker() -> redis.Redis | None:
    url = settings.CELERY_BROKER_URL
    if urlparse(url).scheme not in ("redis", "rediss", "unix"):
        return None  # memory:// in the embedded profile: there are no queues to measure
    client = _redis_clients.get(url)
    if client is None:
        # Short timeouts: a dashboard or a scrape must not hang on a broker that is down.
        client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
        _redis_clients[url] = client
    return client


def queue_depths() -> dict[str, int] | None:
    """Messages waiting in each Celery queue (Redis LLEN, all priority lists); None if unreachable."""
    client = _broker()
    if client is None:
        return None
    try:
        pipe = client.pipeline(transaction=False)
        for queue in QUEUES:
            pipe.llen(queue)
            for step in _PRIORITY_STEPS:
                pipe.llen(f"{queue}{_PRIORITY_SEP}{step}")
        lengths = pipe.execute()
    except redis.RedisError as exc:
        log.warning("queue depth unavailable: %s", exc)
        return None
    per = 1 + len(_PRIORITY_STEPS)
    return {queue: sum(lengths[i * per : (i + 1) * per]) for i, queue in enumerate(QUEUES)}


def oldest_waiting(now: datetime | None = None) -> dict[str, float]:
    """Age in seconds of the oldest message-worthy item per queue (0 when nothing waits).

    cpu: jobs queued for ingest (since creation) or for assembly (since their last page, or since
    a sweep last re-sent them); layout
    and ocr: pages of running jobs waiting for that stage (since they entered it, or since a sweep
    last re-sent them). Which status waits for which queue is ``apps.jobs.states``.
    """
    now = now or timezone.now()
    ages = {q.value: 0.0 for q in Queue}
    for status, queue in JOB_WAITS_FOR.items():
        since = "created_at" if status == Job.Status.QUEUED else "updated_at"
        t = Job.objects.filter(status=status).aggregate(t=Min(since))["t"]
        if t:
            ages[queue] = max(ages[queue], (now - t).total_seconds())
    for status, queue in PAGE_WAITS_FOR.items():
        t = Page.objects.filter(status=status, job__status=Job.Status.RUNNING).aggregate(t=Min("updated_at"))["t"]
        if t:
            ages[queue] = max(ages[queue], (now - t).total_seconds())
    return ages


def dashboard(now: datetime | None = None) -> dict:
    """Numbers for the admin index: the last 24 h by status, throughput, queues, recent failures."""
    now = now or timezone.now()
    by_status = dict(
        Job.objects.filter(created_at__gte=now - timedelta(hours=24))
        .order_by()
        .values_list("status")
        .annotate(n=Count("id"))
    )
    window_min = 10
    pages_recent = Page.objects.filter(
        status=Page.Status.DONE, updated_at__gte=now - timedelta(minutes=window_min)
    ).count()
    failures = list(
        Job.objects.filter(status=Job.Status.FAILED, finished_at__gte=now - timedelta(hours=1))
        .order_by()
        .values("error_code")
        .annotate(n=Count("id"))
        .order_by("-n", "error_code")
    )
    depths = queue_depths()
    ages = oldest_waiting(now)
    return {
        "by_status": [(s.value, s.label, by_status.get(s.value, 0)) for s in Job.Status],
        "jobs_24h": sum(by_status.values()),
        "pages_per_minute": round(pages_recent / window_min, 1),
        "window_min": window_min,
        "queues": [
            {"name": q, "depth": None if depths is None else depths[q], "oldest_s": round(ages.get(q, 0.0), 1)}
            for q in QUEUES
        ],
        "broker_ok": depths is not None,
        "oldest_page_s": round(max(ages[q] for q in PAGE_WAITS_FOR.values()), 1),
        "failures_1h": failures,
    }


# --- Prometheus ------------------------------------------------------------------------------


class PipelineCollector:
    """Scrape-time metrics from the database and the broker (see the module docstring for why).

    Counters are counts of rows, so deleting jobs lowers them; Prometheus reads a drop as a
    counter reset, which ``rate()`` handles.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cached: tuple[float, list[Metric]] | None = None

    def describe(self) -> Iterator[Metric]:
        # Names only, so registering at start-up runs no query (the database may not exist yet).
        yield CounterMetricFamily("ocr_jobs_submitted", "Jobs submitted", labels=["engine"])
        yield CounterMetricFamily("ocr_jobs_completed", "Jobs finished successfully", labels=["engine"])
        yield CounterMetricFamily("ocr_jobs_failed", "Jobs failed, by error code", labels=["error_code"])
        yield CounterMetricFamily("ocr_jobs_cancelled", "Jobs cancelled", labels=["engine"])
        yield GaugeMetricFamily("ocr_jobs", "Jobs now in each status", labels=["status"])
        yield CounterMetricFamily("ocr_jobs_purged", "Jobs whose payload and results were purged")
        yield CounterMetricFamily("ocr_pages_processed", "Pages finished", labels=["engine", "source"])
        yield CounterMetricFamily("ocr_pages_failed", "Pages failed", labels=["engine", "source"])
        yield SummaryMetricFamily("ocr_page_cpu_seconds", "Worker CPU seconds per finished page", labels=["tenant"])
        yield SummaryMetricFamily(
            "ocr_page_gpu_seconds", "Estimated VLM GPU seconds per finished page", labels=["tenant"]
        )
        yield CounterMetricFamily("ocr_job_cpu_seconds", "Worker CPU seconds of job-wide stages", labels=["tenant"])
        yield from self._flag_families()
        yield HistogramMetricFamily("ocr_stage_duration_seconds", "Pipeline stage run time", labels=["stage"])
        yield GaugeMetricFamily("ocr_queue_depth", "Messages waiting in a Celery queue", labels=["queue"])
        yield GaugeMetricFamily("ocr_oldest_queued_age_seconds", "Age of the oldest waiting item", labels=["queue"])

    def collect(self) -> Iterator[Metric]:
        ttl = settings.METRICS_CACHE_SECONDS
        with self._lock:
            if self._cached and time.monotonic() - self._cached[0] < ttl:
                yield from self._cached[1]
                return
            metrics = list(self._measure())
            self._cached = (time.monotonic(), metrics)
        yield from metrics

    def _measure(self) -> Iterator[Metric]:
        submitted = CounterMetricFamily("ocr_jobs_submitted", "Jobs submitted", labels=["engine"])
        completed = CounterMetricFamily("ocr_jobs_completed", "Jobs finished successfully", labels=["engine"])
        cancelled = CounterMetricFamily("ocr_jobs_cancelled", "Jobs cancelled", labels=["engine"])
        current = GaugeMetricFamily("ocr_jobs", "Jobs now in each status", labels=["status"])
        failed = CounterMetricFamily("ocr_jobs_failed", "Jobs failed, by error code", labels=["error_code"])
        purged = CounterMetricFamily("ocr_jobs_purged", "Jobs whose payload and results were purged")
        purged_total = 0
        # One pass over the jobs table; every job series is folded from its rows here.
        totals: dict[str, dict[str, int]] = {"submitted": {}, "done": {}, "cancelled": {}, "status": {}, "failed": {}}
        was_purged = ExpressionWrapper(Q(purged_at__isnull=False), output_field=BooleanField())
        for engine, status, code, is_purged, n in (
            Job.objects.order_by()
            .annotate(is_purged=was_purged)
            .values_list("engine", "status", "error_code", "is_purged")
            .annotate(n=Count("id"))
        ):
            purged_total += n if is_purged else 0
            for key, label in (("submitted", engine), ("status", status)):
                totals[key][label] = totals[key].get(label, 0) + n
            if status in (Job.Status.DONE, Job.Status.CANCELLED):
                totals[status][engine] = totals[status].get(engine, 0) + n
            elif status == Job.Status.FAILED:
                totals["failed"][code or "unknown"] = totals["failed"].get(code or "unknown", 0) + n
        for engine, n in totals["submitted"].items():
            submitted.add_metric([engine], n)
            completed.add_metric([engine], totals["done"].get(engine, 0))
            cancelled.add_metric([engine], totals["cancelled"].get(engine, 0))
        for status in Job.Status:
            current.add_metric([status.value], totals["status"].get(status.value, 0))
        for code, n in totals["failed"].items():
            failed.add_metric([code], n)
        purged.add_metric([], purged_total)
        yield from (submitted, completed, cancelled, current, failed, purged)

        processed = CounterMetricFamily("ocr_pages_processed", "Pages finished", labels=["engine", "source"])
        pages_failed = CounterMetricFamily("ocr_pages_failed", "Pages failed", labels=["engine", "source"])
        pages = (
            Page.objects.filter(status__in=(Page.Status.DONE, Page.Status.FAILED))
            .order_by()
            .values("job__engine", "source", "status")
            .annotate(n=Count("id"))
        )
        for row in pages:
            family = processed if row["status"] == Page.Status.DONE else pages_failed
            family.add_metric([row["job__engine"], row["source"]], row["n"])
        yield from (processed, pages_failed)
        yield from self._costs()
        yield from self._flags()

        yield self._stage_histogram()

        depth = GaugeMetricFamily("ocr_queue_depth", "Messages waiting in a Celery queue", labels=["queue"])
        for queue, n in (queue_depths() or {}).items():
            depth.add_metric([queue], n)
        yield depth
        age = GaugeMetricFamily("ocr_oldest_queued_age_seconds", "Age of the oldest waiting item", labels=["queue"])
        for queue, seconds in oldest_waiting().items():
            age.add_metric([queue], seconds)
        yield age

    @staticmethod
    def _costs() -> Iterator[Metric]:
        """Worker CPU per page and per tenant (``workers.costs``): pages' layout and recognition,
        and the job-wide stages (ingest, which reads text-layer pages whole, and assembly)."""
        per_page = SummaryMetricFamily(
            "ocr_page_cpu_seconds", "Worker CPU seconds per finished page (layout + recognition)", labels=["tenant"]
        )
        rows = (
            Page.objects.filter(status=Page.Status.DONE)
            .order_by()
            .values("job__tenant")
            .annotate(n=Count("id"), cpu=Sum("cpu_ms"), gpu=Sum("gpu_ms"))
        )
        gpu_per_page = SummaryMetricFamily(
            "ocr_page_gpu_seconds",
            "Estimated VLM GPU seconds per finished page (request time × its share; an upper bound)",
            labels=["tenant"],
        )
        for row in rows:
            per_page.add_metric([row["job__tenant"]], count_value=row["n"], sum_value=(row["cpu"] or 0) / 1000)
            gpu_per_page.add_metric([row["job__tenant"]], count_value=row["n"], sum_value=(row["gpu"] or 0) / 1000)
        job_wide = CounterMetricFamily(
            "ocr_job_cpu_seconds", "Worker CPU seconds of job-wide stages (ingest, assembly)", labels=["tenant"]
        )
        for tenant, cpu in Job.objects.order_by().values_list("tenant").annotate(cpu=Sum("cpu_ms")):
            job_wide.add_metric([tenant], (cpu or 0) / 1000)
        yield from (per_page, gpu_per_page, job_wide)

    @staticmethod
    def _flag_families() -> tuple[CounterMetricFamily, CounterMetricFamily, CounterMetricFamily]:
        return (
            CounterMetricFamily(
                "ocr_pages_flagged", "Pages flagged, by flag (ocrsite.vocabulary.PageFlag)", labels=["flag"]
            ),
            CounterMetricFamily("ocr_jobs_flagged", "Jobs with a flagged page", labels=["flag"]),
            CounterMetricFamily(
                "ocr_pages_turned", "Pages whose text stood turned as submitted", labels=["source", "rotation"]
            ),
        )

    def _flags(self) -> Iterator[Metric]:
        """Flagged pages and jobs by flag, and turned pages; rows are grouped by their whole flag
        list in SQL (flagged rows are few), then counted per flag here."""
        pages, jobs, turned = self._flag_families()
        for family, model in ((pages, Page), (jobs, Job)):
            # Every page flag the product sets has its series from the start, so an alert on
            # one (ocr:low-confidence, orientation:unsure) sees 0 rather than nothing.
            counts: dict[str, int] = dict.fromkeys(map(str, PageFlag), 0)
            for flags, n in model.objects.exclude(flags=[]).order_by().values_list("flags").annotate(n=Count("id")):
                for flag in flags or []:
                    counts[flag] = counts.get(flag, 0) + n
            for flag, n in sorted(counts.items()):
                family.add_metric([flag], n)
        rows = Page.objects.exclude(rotation=0).order_by().values_list("source", "rotation").annotate(n=Count("id"))
        for source, rotation, n in rows:
            turned.add_metric([source, str(rotation)], n)
        yield from (pages, jobs, turned)

    def _stage_histogram(self) -> HistogramMetricFamily:
        """Cumulative buckets straight from SQL: one pass over pipeline (not operator) events."""
        buckets = {f"le_{i}": Count("id", filter=Q(duration_ms__lte=b * 1000)) for i, b in enumerate(STAGE_BUCKETS_S)}
        rows = (
            StageEvent.objects.filter(actor="", duration_ms__isnull=False)
            .order_by()
            .values("stage")
            .annotate(total=Count("id"), sum_ms=Sum("duration_ms"), **buckets)
        )
        family = HistogramMetricFamily("ocr_stage_duration_seconds", "Pipeline stage run time", labels=["stage"])
        for row in rows:
            cumulative = [(str(b), row[f"le_{i}"]) for i, b in enumerate(STAGE_BUCKETS_S)]
            cumulative.append(("+Inf", row["total"]))
            family.add_metric([row["stage"]], cumulative, sum_value=(row["sum_ms"] or 0) / 1000)
        return family


collector = PipelineCollector()
