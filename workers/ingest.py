"""Stage 1, ingest [queue: cpu]: split a job's document into pages.

Born-digital pages (a usable text layer) finish here; the others get a page image in storage and
wait for layout — or, for jobs whose engine needs no layout pass (one-stage page models), go
straight to recognition so they never wake the GPU layout tier.

A redelivery after a crash finishes what the first delivery left (pages it did not create, pages
still waiting to be sent on); two deliveries at once are kept apart by a per-job lock.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.utils import timezone

from apps.jobs import enqueue, services, states
from apps.jobs.documents import (
    InputError,
    encode_png,
    load_image_frame,
    open_pdf,
    release_pdf_caches,
    render_pdf_page,
    straighten_sideways_scan,
)
from apps.jobs.models import Job, Page, StageEvent
from ocrsite.celery import app
from ocrsite.vocabulary import TaskName
from workers import engine_setup
from workers.engines import textlayer
from workers.regions import write_regions
from workers.retry import PipelineTask

log = logging.getLogger(__name__)

# Scans without a DPI tag: the common scanner default.
DEFAULT_SCAN_DPI = 300


@app.task(base=PipelineTask, name=TaskName.INGEST.value)
def ingest(job_id: str) -> None:
    """Split a job into pages; safe to deliver twice. A job that is gone or finished is left alone."""
    split_document(job_id)


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
        started = timezone.now()
        try:
            with default_storage.open(job.source.name, "rb") as fh:
                data = fh.read()
            waiting, created = _split_pages(job, data)
        except InputError as exc:
            services.record(job_id, "ingest", started=started, outcome="failed", error_code=exc.code)
            services.fail_job(job_id, exc.code, exc.message)
            return
        # A late duplicate that only re-sends waiting pages leaves no second event.
        if created or not StageEvent.objects.filter(job_id=job_id, stage="ingest").exists():
            services.record(job_id, "ingest", started=started, detail={"ocr_pages": len(waiting)})
    if not waiting:
        return
    if engine_setup.for_job(job.engine).needs_layout:
        transaction.on_commit(lambda: enqueue.detect_layout(waiting))
    else:
        ready = [pid for pid in waiting if services.move_page(pid, states.SKIP_LAYOUT)]
        transaction.on_commit(lambda: enqueue.recognize(ready))


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


def _split_pages(job: Job, data: bytes) -> tuple[list[int], int]:
    """Ids of the pages that wait for layout, and how many pages this call created."""
    existing = {p.index: p for p in job.pages.all()}
    force_ocr = job.options.get("ocr") == "force"
    dpi = settings.OCR_DPI
    waiting: list[int] = []
    created = 0
    if job.kind == "pdf":
        with open_pdf(data) as doc:
            for index, pdf_page in enumerate(doc):
                page = existing.get(index)
                if page and page.status != Page.Status.QUEUED:
                    continue  # finished, or already sent on by an earlier delivery
                size_pt = (pdf_page.rect.width, pdf_page.rect.height)
                if not force_ocr and textlayer.has_text_layer(pdf_page, settings.OCR_TEXT_LAYER_MIN_CHARS):
                    _finish_text_page(job, index, pdf_page, dpi, size_pt)
                    created += 1
                    continue
                if page is None or not page.image:
                    if straighten_sideways_scan(pdf_page):
                        size_pt = (pdf_page.rect.width, pdf_page.rect.height)
                    image, used_dpi = render_pdf_page(pdf_page, dpi, settings.OCR_MAX_IMAGE_PIXELS)
                    page = _store_page_image(job, index, image, used_dpi, size_pt)
                    created += 1
                waiting.append(page.pk)
        release_pdf_caches()
    else:
        for index in range(job.page_count):
            page = existing.get(index)
            if page and page.status != Page.Status.QUEUED:
                continue
            if page is None or not page.image:
                image, img_dpi = load_image_frame(data, index, settings.OCR_MAX_IMAGE_PIXELS)
                img_dpi = img_dpi or DEFAULT_SCAN_DPI
                size_pt = (image.shape[1] * 72 / img_dpi, image.shape[0] * 72 / img_dpi)
                page = _store_page_image(job, index, image, img_dpi, size_pt)
                created += 1
            waiting.append(page.pk)
    return waiting, created


def _store_page_image(job: Job, index: int, image: np.ndarray, dpi: int, size_pt) -> Page:
    name = services.save_bytes(f"pages/{job.pk}/{index:05d}.png", encode_png(image))
    page, _ = Page.objects.update_or_create(
        job=job,
        index=index,
        defaults={
            "image": name,
            "source": Page.Source.OCR,
            "status": Page.Status.QUEUED,
            "width": image.shape[1],
            "height": image.shape[0],
            "dpi": dpi,
            "width_pt": size_pt[0],
            "height_pt": size_pt[1],
        },
    )
    return page


def _finish_text_page(job: Job, index: int, pdf_page, dpi: int, size_pt) -> None:
    started = time.perf_counter()
    found = textlayer.extract(pdf_page, dpi, engine_setup.text_layer())
    # One transaction: a crash leaves no half-written text page for a redelivery to trip on.
    with transaction.atomic():
        page, _ = Page.objects.update_or_create(
            job=job,
            index=index,
            defaults={
                "source": Page.Source.TEXT_LAYER,
                "status": states.RECOGNIZED.frm,
                "width": round(size_pt[0] * dpi / 72),
                "height": round(size_pt[1] * dpi / 72),
                "dpi": dpi,
                "width_pt": size_pt[0],
                "height_pt": size_pt[1],
            },
        )
        write_regions(page, found, source=Page.Source.TEXT_LAYER, engine=textlayer.ENGINE_NAME)
        elapsed = int((time.perf_counter() - started) * 1000)
        services.finish_page(page.pk, states.RECOGNIZED, recognize_ms=elapsed)
