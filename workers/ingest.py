"""Stage 1, ingest [queue: cpu]: split a job's document into pages.

Born-digital pages (a usable text layer) finish here; the others get a page image in storage and
wait for layout — or, for jobs whose engine needs no layout pass (one-stage page models), go
straight to recognition so they never wake the GPU layout tier.

A redelivery after a crash finishes what the first delivery left (pages it did not create, pages
still waiting to be sent on); two deliveries at once are kept apart by a per-job lock.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.utils import timezone

from apps.jobs import enqueue, lanes, page_ranges, services, states
from apps.jobs.documents import InputError
from apps.jobs.models import Job, Page, StageEvent
from ocrsite.celery import app
from ocrsite.vocabulary import ErrorCode, TaskName
from workers import budget, costs, engine_setup
from workers.engines import textlayer
from workers.regions import write_regions
from workers.retry import PipelineTask

log = logging.getLogger(__name__)

SPOOL_CHUNK = 1 << 20


@app.task(base=PipelineTask, name=TaskName.INGEST.value)
def ingest(job_id: str | None) -> None:
    """Split a job into pages; safe to deliver twice. A job that is gone or finished is left alone.
    Without an id (a lane token), the fairest next job of the tenants' lanes (``apps.jobs.lanes``):
    a tenant whose documents already hold ingest slots is served after the others."""
    if job_id is not None:
        split_document(job_id)
        return
    taken = lanes.take_live("ingest", 1, settings.OCR_INGEST_HARD_LIMIT, _waiting_for_ingest)
    try:
        for _, item in taken:
            split_document(item)
    finally:
        if taken:
            lanes.release("ingest", taken)


def _waiting_for_ingest(items: list[str]) -> set[str]:
    """Queued jobs, and running ones (a redelivery finishes what an earlier ingest left)."""
    active = Job.objects.filter(pk__in=items, status__in=(Job.Status.QUEUED, Job.Status.RUNNING))
    return {str(pk) for pk in active.values_list("pk", flat=True)}


def split_document(job_id: str) -> None:
    job = Job.objects.filter(pk=job_id).first()
    if job is None:
        return
    with ingest_lock(job_id) as held:
        if not held:
            return  # another delivery of this message is splitting the document right now
        if not services.start_job(job_id):
            job.refresh_from_db()
            if job.status != Job.Status.RUNNING:
                return  # cancelled, finished, or already past ingest
        # A delivery with pages left to make draws on the job's ingest attempts (a late duplicate
        # that finds them all made does not); past the cap the job fails job:stalled.
        if job.pages.count() < job.page_count and not services.claim_attempt(job_id, "ingest"):
            return
        started = timezone.now()
        send_on = _sender(job)
        try:
            with costs.job_step("ingest", job), local_copy(job.source.name) as path:
                waiting, created = _split_pages(job, path, send_on)
        except SoftTimeLimitExceeded:
            limit = settings.OCR_INGEST_SOFT_LIMIT
            exc = InputError(ErrorCode.INPUT_TOO_COMPLEX, f"the document took longer than {limit} s to split")
        except InputError as caught:
            exc = caught
        except Cancelled:
            services.record(job_id, "ingest", started=started, outcome="cancelled")
            return
        else:
            exc = None
        if exc is not None:
            services.record(job_id, "ingest", started=started, outcome="failed", error_code=exc.code)
            services.fail_job(job_id, exc.code, exc.message)
            return
        # A late duplicate that only re-sends waiting pages leaves no second event.
        if created or not StageEvent.objects.filter(job_id=job_id, stage="ingest").exists():
            services.record(job_id, "ingest", started=started, detail={"ocr_pages": len(waiting)})


def _sender(job: Job) -> Callable[[int], None]:
    """Sends one stored page on to its next stage, as soon as the page's row is committed, so
    layout and recognition start on the first pages while ingest renders the rest."""
    tenant = job.tenant
    if engine_setup.for_job(job.engine).needs_layout:
        return lambda page_id: transaction.on_commit(lambda: enqueue.detect_layout([page_id], tenant=tenant))

    def skip_layout(page_id: int) -> None:
        if services.move_page(page_id, states.SKIP_LAYOUT):
            transaction.on_commit(lambda: enqueue.recognize([page_id], tenant=tenant))

    return skip_layout


@contextmanager
def local_copy(name: str) -> Iterator[str]:
    """A path to the stored document that MuPDF and Pillow can read page by page.

    Local storage gives its own file; remote storage (S3, Azure) is spooled to a temporary file
    in chunks, so the document is never held whole in memory.
    """
    try:
        path = default_storage.path(name)
    except NotImplementedError:
        path = None  # no local path: a remote backend
    if path is not None:
        yield path
        return
    with tempfile.NamedTemporaryFile(prefix="ocr-ingest-", suffix=".bin") as spool:
        with default_storage.open(name, "rb") as fh:
            shutil.copyfileobj(fh, spool, SPOOL_CHUNK)
        spool.flush()
        yield spool.name


@contextmanager
def ingest_lock(job_id: str) -> Iterator[bool]:
    """A PostgreSQL session advisory lock on the job, taken without waiting.

    Two copies of an ingest message running at once would both find a page missing and both
    create it (the second a unique-key error, or for a text-layer page a second count of the
    same page). The lock is not a row lock, so a cancel is never kept waiting by a long ingest,
    and it goes away with the connection if the worker dies. SQLite (the embedded CLI) runs one
    task at a time and needs none.
    """
    if connection.vendor != "postgresql":
        yield True
        return
    key = uuid.UUID(str(job_id)).int & ((1 << 63) - 1)  # advisory keys are signed 64-bit
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        held = bool(cursor.fetchone()[0])
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def _split_pages(job: Job, path: str, send_on: Callable[[int], None]) -> tuple[list[int], int]:
    """Ids of the pages sent on to layout, and how many pages this call created.

    One page at a time: read, stored, committed and sent on before the next is touched, so
    memory holds one page image and the first pages are being read while the last are rendered.
    """
    existing = {p.index: p for p in job.pages.all()}
    force_ocr = job.options.get("ocr") == "force"
    spec = job.options.get("pages")
    dpi = settings.OCR_DPI
    waiting: list[int] = []
    created = 0
    still = _StillRunning(job.pk)
    if job.kind == "pdf":
        # Each page is read under its budget in a child process (workers/budget.py): a page that
        # asks for more ends the job as input:too-complex instead of taking the worker with it.
        unread = []
        for index in page_ranges.indices(spec) if spec else range(job.page_count):
            page = existing.get(index)
            if page and page.status != Page.Status.QUEUED:
                continue  # finished, or already sent on by an earlier delivery
            if page is None or not page.image:
                unread.append(index)
            else:
                waiting.append(page.pk)
                send_on(page.pk)
        request = budget.PageRequest(
            dpi=dpi,
            max_pixels=settings.OCR_MAX_IMAGE_PIXELS,
            min_chars=settings.OCR_TEXT_LAYER_MIN_CHARS,
            force_ocr=force_ocr,
            text_layer=engine_setup.text_layer(),
            reader=_orientation_reader(),
        )
        for found in budget.read_pdf_pages(path, unread, request, page_budget()):
            created += 1
            still.check()
            if isinstance(found, budget.TextPage):
                _finish_text_page(job, found, dpi, new=found.index not in existing)
                continue
            page = _store_page(job, found)
            waiting.append(page.pk)
            send_on(page.pk)
    else:
        # Image frames are decoded under the same budget, in the same kind of child, as PDF pages.
        unread = []
        for index in page_ranges.indices(spec) if spec else range(job.page_count):
            page = existing.get(index)
            if page and page.status != Page.Status.QUEUED:
                continue
            if page is None or not page.image:
                unread.append(index)
            else:
                waiting.append(page.pk)
                send_on(page.pk)
        frames = budget.read_image_frames(
            path, unread, settings.OCR_MAX_IMAGE_PIXELS, page_budget(), _orientation_reader()
        )
        for found in frames:
            created += 1
            page = _store_page(job, found)
            waiting.append(page.pk)
            send_on(page.pk)
            still.check()
    return waiting, created


class Cancelled(Exception):
    """The job left ``running`` (cancelled by its tenant or an operator) while it was split."""


class _StillRunning:
    """Looks, at most once a second, whether the job is still running: a cancelled job's
    remaining pages are not read (its child is stopped when the split unwinds)."""

    EVERY_S = 1.0

    def __init__(self, job_id) -> None:
        self.job_id = job_id
        self.next = time.monotonic() + self.EVERY_S

    def check(self) -> None:
        if time.monotonic() < self.next:
            return
        self.next = time.monotonic() + self.EVERY_S
        if not Job.objects.filter(pk=self.job_id, status=Job.Status.RUNNING).exists():
            raise Cancelled(str(self.job_id))


def _orientation_reader():
    """The orientation check's reader, its models loaded in a worker before the page reader is
    forked, so every job's child shares them (copy-on-write) instead of loading them within its
    own CPU and memory budget: a text PDF with a short text layer, checked as a scan, was failed
    ``input:too-complex`` under a 384 MB page budget by the models alone. The embedded ``manage.py
    ocr`` reads one document per process and loads them in the child where a page needs them."""
    reader = engine_setup.orientation_reader()
    if not app.conf.task_always_eager:
        reader.load()
    return reader


def page_budget() -> budget.PageBudget:
    return budget.PageBudget(
        cpu_s=settings.OCR_PAGE_CPU_SECONDS,
        memory_bytes=settings.OCR_PAGE_MEMORY_MB * 1024 * 1024,
        max_chars=settings.OCR_PAGE_MAX_CHARS,
        wall_s=settings.OCR_PAGE_WALL_SECONDS,
    )


def _store_page(job: Job, found: budget.ImagePage) -> Page:
    """The rendered page's image stored and its row queued for layout."""
    name = services.save_bytes(f"pages/{job.pk}/{found.index:05d}.png", found.png)
    page, _ = Page.objects.update_or_create(
        job=job,
        index=found.index,
        defaults={
            "image": name,
            "source": Page.Source.OCR,
            "status": Page.Status.QUEUED,
            "width": found.width,
            "height": found.height,
            "dpi": found.dpi,
            "width_pt": found.size_pt[0],
            "height_pt": found.size_pt[1],
            "rotation": found.rotation,
            "flags": list(found.flags),
        },
    )
    services.flag_job(job.pk, found.flags)
    return page


def _finish_text_page(job: Job, found: budget.TextPage, dpi: int, *, new: bool) -> None:
    """``new``: the job had no row for this page when ingest began (under the ingest lock no
    other delivery makes one meanwhile), so it is inserted without looking for it first."""
    started = time.perf_counter()
    index, size_pt, read = found.index, found.size_pt, found.read
    if not read.verdict.held:
        log.warning("page %d of job %s: %s", index + 1, job.pk, read.verdict.describe())
    fields = {
        "source": Page.Source.TEXT_LAYER,
        "status": states.RECOGNIZED.frm,
        "width": round(size_pt[0] * dpi / 72),
        "height": round(size_pt[1] * dpi / 72),
        "dpi": dpi,
        "width_pt": size_pt[0],
        "height_pt": size_pt[1],
        "rotation": read.rotation,
        "flags": list(read.flags),
    }
    # One transaction: a crash leaves no half-written text page for a redelivery to trip on.
    with transaction.atomic():
        if new:
            page = Page.objects.create(job=job, index=index, **fields)
        else:
            page, _ = Page.objects.update_or_create(job=job, index=index, defaults=fields)
        write_regions(page, read.regions, source=Page.Source.TEXT_LAYER, engine=textlayer.ENGINE_NAME)
        services.flag_job(job.pk, read.flags)
        elapsed = found.read_ms + int((time.perf_counter() - started) * 1000)
        services.finish_page(page.pk, states.RECOGNIZED, recognize_ms=elapsed)
