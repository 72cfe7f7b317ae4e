"""What a stage costs and where it shows: CPU seconds per page and per job, and a span per step.

CPU is the worker process's own (``getrusage``: user + system, every thread of the process, the
engines' intra-op threads included), taken around a stage's work. A prefork child runs one task
at a time, so the difference is that task's; a batched layout pass is shared evenly among its
pages. In a thread pool (the cluster's vLLM dispatch workers) the process's CPU is shared by the
tasks in flight, so the figure there is an upper bound per page.

Tracing (``ocrsite.telemetry``) is set up here for worker processes: once per pool child (the SDK's
export thread must start after the fork), or once per process for pools that do not fork.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from celery.signals import worker_init, worker_process_init, worker_process_shutdown
from django.db.models import F

from apps.jobs.models import Job, Page
from ocrsite import telemetry
from ocrsite.cputime import cpu_seconds


@worker_process_init.connect
def _trace_pool_child(**_kwargs) -> None:
    telemetry.configure("worker")


@worker_init.connect
def _trace_worker(sender=None, **_kwargs) -> None:
    # Prefork configures in each child (above); solo and thread pools here.
    if sender is not None and "prefork" not in str(getattr(sender, "pool_cls", "")).lower():
        telemetry.configure("worker")


@worker_process_shutdown.connect
def _flush(**_kwargs) -> None:
    telemetry.shutdown()


@contextmanager
def page_step(stage: str, pages: list[Page]) -> Iterator[None]:
    """One span per page (in its job's trace) around a stage's work, and the CPU it took, shared
    among the pages and added to each page's ``cpu_ms``."""
    start = cpu_seconds()
    with ExitStack() as spans:
        for page in pages:
            spans.enter_context(
                telemetry.job_span(
                    f"page.{stage}",
                    job_id=page.job_id,
                    tenant=page.job.tenant,
                    traceparent=page.job.traceparent,
                    page=page.index + 1,
                    batch_pages=len(pages),
                )
            )
        try:
            yield
        finally:
            share = int((cpu_seconds() - start) * 1000 / max(1, len(pages)))
            if share:
                Page.objects.filter(pk__in=[p.pk for p in pages]).update(cpu_ms=F("cpu_ms") + share)


@contextmanager
def job_step(stage: str, job: Job) -> Iterator[None]:
    """A span for a job-wide stage (ingest, assembly) and its CPU on ``Job.cpu_ms``; ingest's
    budgeted page readers are child processes, counted when they have been waited for."""
    start = cpu_seconds(children=True)
    try:
        with telemetry.job_span(stage, job_id=job.pk, tenant=job.tenant, traceparent=job.traceparent):
            yield
    finally:
        spent = int((cpu_seconds(children=True) - start) * 1000)
        if spent:
            Job.objects.filter(pk=job.pk).update(cpu_ms=F("cpu_ms") + spent)
