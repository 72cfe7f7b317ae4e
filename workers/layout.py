"""Stage 2, layout [queue: layout, the T4 tier]: boxes for pages, many pages per forward pass.

One message per page; the collector (``workers.batching``) merges pages from any jobs into one
pass of up to OCR_LAYOUT_BATCH pages, or whatever arrived within OCR_BATCH_WINDOW_MS of the first.
Each page is claimed by compare-and-set, so a duplicate delivery finds nothing to do. One page
that breaks the engine fails alone; a transient engine failure hands the claims back and sends
the pages again per ``workers.retry`` (the steps every page stage shares: ``workers.stage``).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
from django.conf import settings
from django.db import transaction

from apps.jobs import enqueue, services, states
from apps.jobs.models import Page
from ocrsite.celery import app
from ocrsite.vocabulary import Queue, TaskName
from workers import batching, engine_setup
from workers.batching import Collector
from workers.engines.base import EngineError, LayoutBox, LayoutEngine
from workers.regions import load_image, write_regions
from workers.stage import PageStage


@app.task(
    base=Collector,
    name=TaskName.DETECT_LAYOUT.value,
    flush_every=settings.OCR_LAYOUT_BATCH,
    window_s=settings.OCR_BATCH_WINDOW_MS / 1000,
)
def detect_layout(requests: list) -> None:
    """Pages collected from any jobs, in passes of at most OCR_LAYOUT_BATCH. Messages are acked
    after the pass; pages that failed transiently are sent again with backoff."""
    lanes: dict[Queue | None, list] = {}
    for request in requests:
        # Pages taken from the bulk queue go on to recognition on the bulk lane too.
        delivered = (getattr(request, "delivery_info", None) or {}).get("routing_key")
        lanes.setdefault(Queue.BULK if delivered == Queue.BULK else None, []).append(request)
    for queue, group in lanes.items():
        with enqueue.lane(queue):
            for chunk in batching.chunked(batching.page_ids_of(group), settings.OCR_LAYOUT_BATCH):
                detect_pages(chunk)


# Boxes (or the page's own failure) and the engine's name, per page id.
Detected = tuple[dict[int, list[LayoutBox] | EngineError], dict[int, str]]


LAYOUT = PageStage("layout", states.CLAIM_FOR_LAYOUT, states.LAYOUT_FAILED, enqueue.detect_layout, batched=True)


def detect_pages(page_ids: list[int]) -> None:
    """One batched layout pass over the pages we win; each then waits for recognition."""
    LAYOUT.run(page_ids, _detect_per_engine, _write_boxes)


def _write_boxes(pages: list[Page], detected: Detected, started: datetime, elapsed_ms: int) -> None:
    found, engine_names = detected
    per_page_ms = int(elapsed_ms / max(1, len(pages)))
    ready = []
    for page in pages:
        boxes = found[page.pk]
        if isinstance(boxes, EngineError):
            LAYOUT.fail(page, boxes, started)
            continue
        # The move comes first and its row lock is held until commit: if the claim was lost
        # (a sweep handed the page to another worker) this delivery writes nothing. The attempt
        # count starts again for recognition: the cap exists to stop a page that keeps killing
        # the stage it is in, and one death in layout plus two in recognition (three kills of
        # unrelated workers) failed a healthy page in the 10,000-job chaos run.
        with transaction.atomic():
            if not services.move_page(page.pk, states.LAYOUT_DONE, layout_ms=per_page_ms, attempts=0):
                continue
            write_regions(page, [(b, None) for b in boxes], source=Page.Source.OCR, engine="")
            ready.append(page.pk)
        LAYOUT.done(page, started, {"regions": len(boxes), "batch": len(pages), "engine": engine_names[page.pk]})
    if ready:
        transaction.on_commit(lambda: enqueue.recognize(ready))


def _detect_per_engine(pages: list[Page]) -> Detected:
    """One batched pass per layout engine: a collected batch can hold pages of jobs whose
    ``engine`` differs. Pages whose engine needs no layout (a retried or re-sent page of a
    one-stage job) get no boxes. An engine that cannot be built fails only its own pages."""
    groups: dict[str, list[Page]] = {}
    for page in pages:
        groups.setdefault(page.job.engine, []).append(page)
    found: dict[int, list[LayoutBox] | EngineError] = {}
    names: dict[int, str] = {}
    for job_engine, group in groups.items():
        try:
            if not engine_setup.for_job(job_engine).needs_layout:
                found.update((p.pk, []) for p in group)
                names.update((p.pk, "none") for p in group)
                continue
            engine = engine_setup.layout_engine(job_engine)
        except EngineError as exc:
            if not exc.permanent:
                raise
            found.update((p.pk, exc) for p in group)
            names.update((p.pk, job_engine) for p in group)
            continue
        loaded, images = [], []
        for page in group:
            try:
                images.append(load_image(page))
                loaded.append(page)
            except EngineError as exc:  # its image is gone: this page fails, the batch goes on
                if not exc.permanent:
                    raise
                found[page.pk] = exc
        if not images:
            continue
        for page, boxes in zip(loaded, _detect_isolated(engine, images), strict=True):
            found[page.pk] = boxes
            names[page.pk] = engine.name
    return found, names


def _detect_isolated(engine: LayoutEngine, images: list[np.ndarray]) -> list[list[LayoutBox] | EngineError]:
    """Run the batch; if it fails permanently, run page by page so one bad page fails alone."""
    try:
        return engine.detect(images)
    except EngineError as exc:
        if not exc.permanent or len(images) == 1:
            raise
    out: list[list[LayoutBox] | EngineError] = []
    for image in images:
        try:
            out.extend(engine.detect([image]))
        except EngineError as exc:
            if not exc.permanent:
                raise
            out.append(exc)
    return out
