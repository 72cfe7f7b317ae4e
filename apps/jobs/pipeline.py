"""The work of each pipeline stage. Tasks call these with IDs; these call engines and services.

Each stage starts with a compare-and-set claim and ends with one, so a duplicate delivery finds
nothing to claim and returns. Transient engine errors are raised for the task to retry (after
the claim is handed back); permanent ones fail only the page they belong to.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.core.files.storage import default_storage
from django.db import connection, transaction
from django.db.models import Count, F
from django.utils import timezone

from apps.jobs import dispatch, services
from apps.jobs.models import Job, Page, Region, StageEvent
from ocrsite import logcontext
from workers.engines import registry, textlayer
from workers.engines.base import EngineError, LayoutBox, RegionText
from workers.engines.cpu import CpuLayoutConfig, CpuRecognizerConfig
from workers.engines.paddle import PaddleLayoutConfig
from workers.engines.vllm import VllmConfig
from workers.pipeline import assemble as assembly
from workers.pipeline import labels
from workers.pipeline.order import reading_order
from workers.pipeline.probe import InputError, open_pdf
from workers.pipeline.raster import (
    decode_png,
    encode_png,
    load_image_frame,
    render_pdf_page,
    straighten_sideways_scan,
)

log = logging.getLogger(__name__)


def engine_settings(engine: str = Job.Engine.CPU) -> registry.EngineSettings:
    """The engines for a job's ``engine`` (cpu | gpu | vlm-page), configured from settings."""
    threads = settings.OCR_ENGINE_THREADS
    return registry.EngineSettings(
        layout=settings.OCR_LAYOUT_ENGINE,
        recognizer=settings.OCR_RECOGNIZER,
        cpu_layout=CpuLayoutConfig(threads=threads),
        cpu_recognizer=CpuRecognizerConfig(
            threads=threads,
            det_max_side=settings.OCR_DET_MAX_SIDE,
            rec_batch=settings.OCR_REC_BATCH,
            det_limit_side=settings.OCR_DET_LIMIT_SIDE,
            det_limit_type=settings.OCR_DET_LIMIT_TYPE,
        ),
        paddle=PaddleLayoutConfig(
            model_dir=settings.OCR_PADDLE_MODEL_DIR,
            model=settings.OCR_PADDLE_MODEL,
            device=settings.OCR_PADDLE_DEVICE,
            batch_size=settings.OCR_PADDLE_BATCH,
            threshold=settings.OCR_PADDLE_THRESHOLD,
        ),
        vllm=VllmConfig(
            base_url=settings.VLLM_BASE_URL,
            profile=settings.VLLM_PROFILE,
            model=settings.VLLM_MODEL,
            api_key=settings.VLLM_API_KEY,
            max_in_flight=settings.VLLM_MAX_IN_FLIGHT,
            timeout_s=settings.VLLM_TIMEOUT_S,
            retries=settings.VLLM_RETRIES,
            backoff_s=settings.VLLM_BACKOFF_S,
            max_tokens=settings.VLLM_MAX_TOKENS,
            cancel_poll_s=settings.VLLM_CANCEL_POLL_S,
        ),
        vllm_page_profile=settings.VLLM_PAGE_PROFILE,
        vllm_page_base_url=settings.VLLM_PAGE_BASE_URL,
        vllm_page_model=settings.VLLM_PAGE_MODEL,
        vllm_labels=tuple(settings.OCR_VLLM_LABELS),
    ).for_job(engine)


def text_layer_config() -> textlayer.TextLayerConfig:
    return textlayer.TextLayerConfig(min_chars=settings.OCR_TEXT_LAYER_MIN_CHARS)


# --- ingest ------------------------------------------------------------------------------------


def ingest(job_id: str) -> None:
    """Split the document into pages: text-layer pages finish here, the rest queue for layout.

    A redelivery after a crash finishes what the first delivery left (pages it did not create,
    pages still waiting for layout); two deliveries at once are kept apart by a per-job lock.
    """
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
            to_layout, created = _split_pages(job, data)
        except InputError as exc:
            services.record(job_id, "ingest", started=started, outcome="failed", error_code=exc.code)
            services.fail_job(job_id, exc.code, exc.message)
            return
        # A late duplicate that only re-sends waiting pages leaves no second event.
        if created or not StageEvent.objects.filter(job_id=job_id, stage="ingest").exists():
            services.record(job_id, "ingest", started=started, detail={"ocr_pages": len(to_layout)})
    if not to_layout:
        return
    if engine_settings(job.engine).layout == "none":
        # One-stage page models find their own regions: such pages never visit the layout tier,
        # so they cannot wake its GPU workers (KEDA scales them on the layout list).
        ready = [pid for pid in to_layout if services.move_page(pid, Page.Status.QUEUED, Page.Status.DETECTED)]
        transaction.on_commit(lambda: dispatch.recognize(ready))
    else:
        transaction.on_commit(lambda: dispatch.detect_layout(to_layout))


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
    """Page ids to send to layout, and how many pages this call created."""
    existing = {p.index: p for p in job.pages.all()}
    force_ocr = job.options.get("ocr") == "force"
    dpi = settings.OCR_DPI
    to_layout: list[int] = []
    created = 0
    if job.kind == "pdf":
        with open_pdf(data) as doc:
            for index, pdf_page in enumerate(doc):
                page = existing.get(index)
                if page and page.status != Page.Status.QUEUED:
                    continue  # finished, or already handed to layout by an earlier delivery
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
                to_layout.append(page.pk)
    else:
        for index in range(job.page_count):
            page = existing.get(index)
            if page and page.status != Page.Status.QUEUED:
                continue
            if page is None or not page.image:
                image, img_dpi = load_image_frame(data, index, settings.OCR_MAX_IMAGE_PIXELS)
                img_dpi = img_dpi or 300  # scans without a DPI tag: the common scanner default
                size_pt = (image.shape[1] * 72 / img_dpi, image.shape[0] * 72 / img_dpi)
                page = _store_page_image(job, index, image, img_dpi, size_pt)
                created += 1
            to_layout.append(page.pk)
    return to_layout, created


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
    found = textlayer.extract(pdf_page, dpi, text_layer_config())
    # One transaction: a crash leaves no half-written text page for a redelivery to trip on.
    with transaction.atomic():
        page, _ = Page.objects.update_or_create(
            job=job,
            index=index,
            defaults={
                "source": Page.Source.TEXT_LAYER,
                "status": Page.Status.RECOGNIZING,
                "width": round(size_pt[0] * dpi / 72),
                "height": round(size_pt[1] * dpi / 72),
                "dpi": dpi,
                "width_pt": size_pt[0],
                "height_pt": size_pt[1],
            },
        )
        _write_regions(page, found, source=Page.Source.TEXT_LAYER, engine=textlayer.ENGINE_NAME)
        elapsed = int((time.perf_counter() - started) * 1000)
        services.finish_page(page.pk, Page.Status.RECOGNIZING, recognize_ms=elapsed)


# --- layout ------------------------------------------------------------------------------------


def detect_layout(page_ids: Sequence[int]) -> None:
    """One batched layout pass over the pages we win; each then queues for recognition."""
    claimed = services.claim_pages(page_ids, Page.Status.QUEUED, Page.Status.DETECTING)
    if not claimed:
        return
    pages = list(Page.objects.filter(pk__in=claimed).order_by("pk"))
    logcontext.bind(job_id=sorted({str(p.job_id) for p in pages}), page_id=claimed)
    started = timezone.now()
    t0 = time.perf_counter()
    try:
        batches, engine_names = _detect_per_engine(pages)
    except EngineError as exc:
        if _should_retry(exc, pages):
            services.release_pages(claimed, Page.Status.DETECTING, Page.Status.QUEUED)
            raise
        batches = [exc] * len(pages)
    per_page_ms = int((time.perf_counter() - t0) * 1000 / max(1, len(pages)))
    ready = []
    for page, boxes in zip(pages, batches, strict=True):
        if isinstance(boxes, EngineError):
            services.record(
                page.job_id, "layout", page_id=page.pk, started=started, outcome="failed", error_code=boxes.code
            )
            services.finish_page(page.pk, Page.Status.DETECTING, error=(boxes.code, boxes.message))
            continue
        # The move comes first and its row lock is held until commit: if the claim was lost
        # (a sweep handed the page to another worker) this delivery writes nothing.
        with transaction.atomic():
            if not services.move_page(page.pk, Page.Status.DETECTING, Page.Status.DETECTED, layout_ms=per_page_ms):
                continue
            _write_regions(page, [(b, None) for b in boxes], source=Page.Source.OCR, engine="")
            ready.append(page.pk)
        services.record(
            page.job_id,
            "layout",
            page_id=page.pk,
            started=started,
            attempt=page.attempts,
            detail={"regions": len(boxes), "batch": len(pages), "engine": engine_names[page.pk]},
        )
    if ready:
        transaction.on_commit(lambda: dispatch.recognize(ready))


def _detect_per_engine(pages: list[Page]) -> tuple[list, dict[int, str]]:
    """One batched pass per layout engine: a collected batch can hold pages of jobs whose
    ``engine`` differs. Pages of one-stage (vlm-page) jobs get no boxes — the VLM finds its own
    regions. An engine that cannot be built fails only its own pages."""
    engine_of = dict(Page.objects.filter(pk__in=[p.pk for p in pages]).values_list("pk", "job__engine"))
    groups: dict[str, list[Page]] = {}
    for page in pages:
        groups.setdefault(engine_of.get(page.pk, Job.Engine.CPU), []).append(page)
    found: dict[int, object] = {}
    names: dict[int, str] = {}
    for job_engine, group in groups.items():
        config = engine_settings(job_engine)
        if config.layout == "none":
            found.update((p.pk, []) for p in group)
            names.update((p.pk, "none") for p in group)
            continue
        try:
            engine = registry.layout_engine(config)
        except EngineError as exc:
            if not exc.permanent:
                raise
            found.update((p.pk, exc) for p in group)
            names.update((p.pk, config.layout) for p in group)
            continue
        images = [_load_image(p) for p in group]
        for page, boxes in zip(group, _detect_isolated(engine, group, images), strict=True):
            found[page.pk] = boxes
            names[page.pk] = engine.name
    return [found[p.pk] for p in pages], names


def _detect_isolated(engine, pages: list[Page], images: list[np.ndarray]) -> list:
    """Run the batch; if it fails permanently, run page by page so one bad page fails alone."""
    try:
        return engine.detect(images)
    except EngineError as exc:
        if not exc.permanent or len(images) == 1:
            raise
    out: list = []
    for image in images:
        try:
            out.extend(engine.detect([image]))
        except EngineError as exc:
            if not exc.permanent:
                raise
            out.append(exc)
    return out


# --- recognition -------------------------------------------------------------------------------


def recognize(page_id: int) -> None:
    """Text for every region of one page; lines outside every region become regions too."""
    if not services.claim_pages([page_id], Page.Status.DETECTED, Page.Status.RECOGNIZING):
        return
    page = Page.objects.select_related("job").get(pk=page_id)
    logcontext.bind(job_id=page.job_id, page_id=page_id)
    started = timezone.now()
    t0 = time.perf_counter()
    try:
        _inject_fault(page)
        image = _load_image(page)
        regions = list(page.regions.order_by("order"))
        boxes = [_box_of(r) for r in regions]
        engine = registry.recognizer(engine_settings(page.job.engine))
        result = engine.recognize(image, boxes, cancelled=_cancel_check(page.job_id))
    except EngineError as exc:
        if exc.code == "job:cancelled":
            # The recognizer aborted its in-flight requests; the cancelled job keeps nothing.
            services.record(
                page.job_id, "recognize", page_id=page_id, started=started, outcome="cancelled", error_code=exc.code
            )
            return
        if _should_retry(exc, [page]):
            services.release_pages([page_id], Page.Status.RECOGNIZING, Page.Status.DETECTED)
            raise
        services.record(
            page.job_id, "recognize", page_id=page_id, started=started, outcome="failed", error_code=exc.code
        )
        services.finish_page(page_id, Page.Status.RECOGNIZING, error=(exc.code, exc.message))
        return
    elapsed = int((time.perf_counter() - t0) * 1000)
    with transaction.atomic():
        demoted = labels.false_titles([r.label for r in regions], result.texts)
        for i, (region, text) in enumerate(zip(regions, result.texts, strict=True)):
            if i in demoted:
                region.label = "text"
                text = replace(text, flags=(*text.flags, "title-demoted"))
            _apply_text(region, text, engine.name)
        found = [(box, text) for box, text in result.extra]
        start = len(regions)
        for offset, (box, text) in enumerate(found):
            _create_region(page, start + offset, box, text, source=Page.Source.OCR, engine=engine.name)
        # Re-order only when regions were added among layout's, or came without an order: a
        # layout engine's reading order (PP-DocLayoutV3) and a one-stage model's output order
        # are kept as given.
        if found and (regions or any(box.order is None for box, _ in found)):
            _renumber(page)
        if not services.finish_page(page_id, Page.Status.RECOGNIZING, recognize_ms=elapsed):
            # The claim went stale and was handed on: the other worker's text is the one kept.
            transaction.set_rollback(True)
            return
    services.record(
        page.job_id,
        "recognize",
        page_id=page_id,
        started=started,
        attempt=page.attempts,
        detail={"regions": len(regions) + len(found), "engine": engine.name},
    )


def _cancel_check(job_id) -> Callable[[], bool]:
    """Polled by long-running recognizers (vLLM) so a cancel aborts requests in flight."""
    return lambda: Job.objects.filter(pk=job_id, status=Job.Status.CANCELLED).exists()


def _should_retry(exc: EngineError, pages: Sequence[Page]) -> bool:
    """Transient errors retry until a page has used its attempts; the count lives in the
    database, so sweeps and redeliveries cannot retry a page forever."""
    return not exc.permanent and max(p.attempts for p in pages) < settings.OCR_MAX_ATTEMPTS


def _inject_fault(page: Page) -> None:
    """Test-only fault injection through configuration: OCR_FAIL_PAGES lists page numbers
    (1-based) that fail permanently, so retry can be exercised on a real worker."""
    if str(page.index + 1) in settings.OCR_FAIL_PAGES:
        raise EngineError("engine:injected-fault", f"page {page.index + 1} is listed in OCR_FAIL_PAGES", permanent=True)


# --- assembly ----------------------------------------------------------------------------------


def assemble(job_id: str) -> None:
    """Markdown and JSON into storage, then assembling → done (once)."""
    job = Job.objects.filter(pk=job_id, status=Job.Status.ASSEMBLING).first()
    if job is None:
        return
    started = timezone.now()
    pages = page_dicts(job)
    markdown = assembly.to_markdown(pages)
    payload = assembly.to_json(job_summary(job), pages)
    md_name = services.save_bytes(f"results/{job.pk}.md", markdown.encode())
    json_name = services.save_bytes(f"results/{job.pk}.json", payload.encode())
    if services.finish_job(job.pk, md_name, json_name):
        services.record(job.pk, "assemble", started=started, detail={"pages": len(pages)})


def job_summary(job: Job) -> dict:
    return {
        "id": str(job.pk),
        "filename": job.filename,
        "kind": job.kind,
        "sha256": job.sha256,
        "engine": job.engine,
        "page_count": job.page_count,
    }


def page_dicts(job: Job) -> list[dict]:
    pages = []
    regions_by_page: dict[int, list[dict]] = {}
    for r in Region.objects.filter(page__job=job).order_by("page_id", "order", "pk"):
        regions_by_page.setdefault(r.page_id, []).append(
            {
                "order": r.order,
                "label": r.label,
                "bbox": r.bbox,
                "polygon": r.polygon,
                "text": r.text,
                "confidence": r.confidence,
                "score": r.score,
                "source": r.source,
                "engine": r.engine,
                "flags": r.flags,
            }
        )
    for p in job.pages.order_by("index"):
        pages.append(
            {
                "index": p.index,
                "width": p.width,
                "height": p.height,
                "dpi": p.dpi,
                "width_pt": p.width_pt,
                "height_pt": p.height_pt,
                "source": p.source,
                "regions": regions_by_page.get(p.pk, []),
            }
        )
    return pages


# --- sweep -------------------------------------------------------------------------------------


def sweep() -> dict[str, int]:
    """Re-enqueue work whose claim went stale or whose message was lost (Redis restarted).

    Duplicates this may create are harmless: every stage claims by compare-and-set.
    """
    now = timezone.now()
    stale = now - timedelta(seconds=settings.OCR_STALE_AFTER)
    counts = {}
    # Claims held past the hard time limit: the worker died. Hand them back and send them again
    # now (releasing touches updated_at, so the waiting-page query below would skip them).
    released: dict[str, list[int]] = {}
    for frm, to in ((Page.Status.DETECTING, Page.Status.QUEUED), (Page.Status.RECOGNIZING, Page.Status.DETECTED)):
        ids = list(
            Page.objects.filter(status=frm, updated_at__lt=stale, job__status=Job.Status.RUNNING).values_list(
                "pk", flat=True
            )[:1000]
        )
        services.release_pages(ids, frm, to)
        # Only those still in ``to``: a page that moved on between the two queries is not ours.
        released[to] = list(Page.objects.filter(pk__in=ids, status=to).values_list("pk", flat=True))
        counts[f"released_{frm}"] = len(released[to])
    waiting = Page.objects.filter(updated_at__lt=stale, job__status=Job.Status.RUNNING)
    layout_ids = released[Page.Status.QUEUED] + list(
        waiting.filter(status=Page.Status.QUEUED).values_list("pk", flat=True)[:1000]
    )
    rec_ids = released[Page.Status.DETECTED] + list(
        waiting.filter(status=Page.Status.DETECTED).values_list("pk", flat=True)[:1000]
    )
    dispatch.detect_layout(layout_ids)
    dispatch.recognize(rec_ids)
    # Touch what we re-sent so the next sweep waits a full period before sending it again.
    Page.objects.filter(pk__in=layout_ids + rec_ids).update(updated_at=now)
    jobs = Job.objects.filter(updated_at__lt=stale)
    for job_id in jobs.filter(status=Job.Status.QUEUED).values_list("pk", flat=True)[:1000]:
        dispatch.ingest(str(job_id))
    # A running job with pages still missing lost its ingest (the worker died mid-split, or the
    # message was lost after the job was claimed): ingest again; it skips the pages it made.
    unsplit = (
        jobs.filter(status=Job.Status.RUNNING)
        .annotate(made=Count("pages"))
        .filter(made__lt=F("page_count"))
        .values_list("pk", flat=True)[:1000]
    )
    for job_id in unsplit:
        dispatch.ingest(str(job_id))
    for job_id in jobs.filter(status=Job.Status.ASSEMBLING).values_list("pk", flat=True)[:1000]:
        dispatch.assemble(str(job_id))
    counts.update(layout=len(layout_ids), recognize=len(rec_ids))
    return counts


# --- region rows -------------------------------------------------------------------------------


def _write_regions(page: Page, found: list[tuple[LayoutBox, RegionText | None]], *, source: str, engine: str) -> None:
    """Replace the page's regions (a redelivered stage rewrites, never appends)."""
    page.regions.all().delete()
    order = _order_of([box for box, _ in found])
    for rank, i in enumerate(order):
        box, text = found[i]
        _create_region(page, rank, box, text, source=source, engine=engine)


def _create_region(
    page: Page, order: int, box: LayoutBox, text: RegionText | None, *, source: str, engine: str
) -> Region:
    x0, y0, x1, y1 = box.bbox
    return Region.objects.create(
        page=page,
        order=order,
        label=box.label,
        x0=x0,
        y0=y0,
        x1=x1,
        y1=y1,
        polygon=[list(p) for p in box.polygon] if box.polygon else None,
        score=box.score,
        text=text.text if text else "",
        confidence=text.confidence if text else None,
        status=Region.Status.DONE if text else Region.Status.PENDING,
        source=source,
        engine=engine if text else "",
        flags=list(text.flags) if text else [],
        latency_ms=text.latency_ms if text else None,
    )


def _apply_text(region: Region, text: RegionText, engine: str) -> None:
    region.text = text.text
    region.confidence = text.confidence
    region.flags = list(text.flags)
    region.latency_ms = text.latency_ms
    region.engine = engine
    # A region the recognizer could not read fails alone, with its code; the page goes on.
    region.status = Region.Status.FAILED if text.error else Region.Status.DONE
    region.error_code, region.error_message = text.error or ("", "")
    region.attempts += 1
    region.save(
        update_fields=[
            "label",
            "text",
            "confidence",
            "flags",
            "latency_ms",
            "engine",
            "status",
            "attempts",
            "error_code",
            "error_message",
            "updated_at",
        ]
    )


def _renumber(page: Page) -> None:
    regions = list(page.regions.all())
    boxes = [LayoutBox(r.label, r.bbox, r.score) for r in regions]
    for rank, i in enumerate(_order_of(boxes)):
        if regions[i].order != rank:
            regions[i].order = rank
            regions[i].save(update_fields=["order", "updated_at"])


def _order_of(boxes: list[LayoutBox]) -> list[int]:
    if boxes and all(b.order is not None for b in boxes):
        return sorted(range(len(boxes)), key=lambda i: boxes[i].order)
    return reading_order([b.bbox for b in boxes])


def _box_of(region: Region) -> LayoutBox:
    polygon = tuple(tuple(p) for p in region.polygon) if region.polygon else None
    return LayoutBox(label=region.label, bbox=region.bbox, score=region.score, polygon=polygon)


def _load_image(page: Page) -> np.ndarray:
    if not page.image:
        raise EngineError("page:no-image", f"page {page.index + 1} has no stored image", permanent=True)
    with default_storage.open(page.image.name, "rb") as fh:
        return decode_png(fh.read())
