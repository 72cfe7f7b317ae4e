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

from apps.jobs import enqueue, lanes, services, states
from apps.jobs.models import Job, Page
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
    after the pass; pages that failed transiently are sent again with backoff. A token (a message
    without ids) takes the fairest next page from the tenants' lanes (``apps.jobs.lanes``); the
    bulk queue's messages always carry their ids, and what they lead to stays on the bulk lane."""
    bulk, online = [], []
    for request in requests:
        delivered = (getattr(request, "delivery_info", None) or {}).get("routing_key")
        (bulk if delivered == Queue.BULK else online).append(request)
    if bulk:
        with enqueue.lane(Queue.BULK):
            for chunk in batching.chunked(batching.page_ids_of(bulk), settings.OCR_LAYOUT_BATCH):
                detect_pages(chunk)
    if online:
        _detect_online(online)


def _detect_online(requests: list) -> None:
    ids = batching.page_ids_of(requests)
    tokens = batching.tokens_of(requests)
    taken = lanes.take_live("layout", tokens, settings.OCR_TASK_HARD_LIMIT, _waiting_for_layout) if tokens else []
    try:
        ids += [int(item) for _, item in taken if int(item) not in ids]
        for chunk in batching.chunked(ids, settings.OCR_LAYOUT_BATCH):
            detect_pages(chunk)
    finally:
        if taken:
            lanes.release("layout", taken)


def _waiting_for_layout(items: list[str]) -> set[str]:
    ids = Page.objects.filter(pk__in=[int(i) for i in items], status=Page.Status.QUEUED, job__status=Job.Status.RUNNING)
    return {str(pk) for pk in ids.values_list("pk", flat=True)}


# Boxes (or the page's own failure) and the engine's name, per page id.
Detected = tuple[dict[int, list[LayoutBox] | EngineError], dict[int, str]]


LAYOUT = PageStage("layout", states.CLAIM_FOR_LAYOUT, states.LAYOUT_FAILED, enqueue.detect_layout, batched=True)


def detect_pages(page_ids: list[int]) -> None:
    """One batched layout pass over the pages we win; each then waits for recognition."""
    LAYOUT.run(page_ids, _detect_per_engine, _write_boxes)


def _write_boxes(pages: list[Page], detected: Detected, started: datetime, elapsed_ms: int) -> None:
    found, engine_names = detected
    per_page_ms = int(elapsed_ms / max(1, len(pages)))
    ready: dict[str, list[int]] = {}
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
            ready.setdefault(page.job.tenant, []).append(page.pk)
        LAYOUT.done(page, started, {"regions": len(boxes), "batch": len(pages), "engine": engine_names[page.pk]})
    # Each tenant's pages to its own lane of recognition.
    for tenant, ids in ready.items():
        transaction.on_commit(lambda tenant=tenant, ids=ids: enqueue.recognize(ids, tenant=tenant))


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
