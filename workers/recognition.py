"""Stage 3, recognition [queue: ocr]: text for every region of one page.

The CPU recognizer reads the whole page once and assigns its lines to the layout regions (lines
outside every region become regions of their own); the VLM recognizers read region by region, or
a one-stage model reads the page and returns its own regions. A cancel reaches requests already
in flight. A transient failure hands the claim back and sends the page again per
``workers.retry``; a permanent one fails this page only (``workers.stage``: the steps every page
stage shares).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.db import transaction

from apps.jobs import enqueue, lanes, services, states
from apps.jobs.models import Job, Page, Region
from ocrsite.celery import app
from ocrsite.vocabulary import TaskName
from workers import engine_setup
from workers.content import confidence, labels
from workers.engines.base import Recognition, Recognizer
from workers.regions import apply_text, box_of, create_region, load_image, renumber
from workers.retry import PipelineTask
from workers.stage import PageStage


@app.task(base=PipelineTask, name=TaskName.RECOGNIZE.value)
def recognize(page_id: int | None) -> None:
    """Text for every region of one page; safe to deliver twice. Without an id (a lane token),
    the fairest next page of the tenants' lanes (``apps.jobs.lanes``)."""
    if page_id is not None:
        recognize_page(page_id)
        return
    taken = lanes.take_live("recognize", 1, settings.OCR_TASK_HARD_LIMIT, _waiting_for_recognition)
    try:
        for _, item in taken:
            recognize_page(int(item))
    finally:
        if taken:
            lanes.release("recognize", taken)


RECOGNITION = PageStage("recognize", states.CLAIM_FOR_RECOGNITION, states.RECOGNITION_FAILED, enqueue.recognize)


def _waiting_for_recognition(items: list[str]) -> set[str]:
    ids = Page.objects.filter(
        pk__in=[int(i) for i in items], status=Page.Status.DETECTED, job__status=Job.Status.RUNNING
    )
    return {str(pk) for pk in ids.values_list("pk", flat=True)}


class Read(NamedTuple):
    engine: Recognizer
    regions: list[Region]
    result: Recognition


def recognize_page(page_id: int) -> None:
    RECOGNITION.run([page_id], _read, _write)


def _read(pages: list[Page]) -> Read:
    [page] = pages
    image = load_image(page)
    regions = list(page.regions.order_by("order"))
    engine = engine_setup.recognizer(page.job.engine)
    return Read(
        engine, regions, engine.recognize(image, [box_of(r) for r in regions], cancelled=_cancel_check(page.job_id))
    )


def _write(pages: list[Page], read: Read, started: datetime, elapsed_ms: int) -> None:
    [page] = pages
    engine, regions, result = read
    with transaction.atomic():
        demoted = labels.false_titles([r.label for r in regions], result.texts)
        for i, (region, text) in enumerate(zip(regions, result.texts, strict=True)):
            if i in demoted:
                region.label = "text"
                text = replace(text, flags=(*text.flags, "title-demoted"))
            apply_text(region, text, engine.name)
        found = list(result.extra)
        for offset, (box, text) in enumerate(found):
            create_region(page, len(regions) + offset, box, text, source=Page.Source.OCR, engine=engine.name)
        # Re-order only when regions were added among layout's, or came without an order: a
        # layout engine's reading order (PP-DocLayoutV3) and a one-stage model's output order
        # are kept as given.
        if found and (regions or any(box.order is None for box, _ in found)):
            renumber(page)
        if result.script:
            # The script the recognizer judged the page to be in (the JSON's page ``script``).
            Page.objects.filter(pk=page.pk).update(script=result.script)
        flags = _confidence_flags(page, result.flags)
        services.flag_job(page.job_id, flags)  # before the page counts: assembly reads the job's flags
        # The VLM's estimated GPU time for this page (0 on the CPU engines).
        gpu_ms = sum(t.gpu_ms or 0 for t in result.texts) + sum(t.gpu_ms or 0 for _, t in found)
        finished = services.finish_page(page.pk, states.RECOGNIZED, recognize_ms=elapsed_ms, flags=flags, gpu_ms=gpu_ms)
        if finished is None:
            # The claim went stale and was handed on: the other worker's text is the one kept.
            transaction.set_rollback(True)
            return
    RECOGNITION.done(page, started, {"regions": len(regions) + len(found), "engine": engine.name})


def _confidence_flags(page: Page, found: tuple[str, ...] = ()) -> list[str]:
    """The page's flags, with those the recognizer raised (``found``: ``script:unsupported``) and
    ``ocr:low-confidence`` judged on the text it now holds."""
    read = confidence.page_confidence(page.regions.values_list("text", "confidence"))
    flags = list(dict.fromkeys([*(page.flags or []), *found]))
    return confidence.with_confidence_flag(flags, read, settings.OCR_LOW_CONFIDENCE)


def _cancel_check(job_id) -> Callable[[], bool]:
    """Polled by long-running recognizers (vLLM) so a cancel aborts requests in flight."""
    return lambda: Job.objects.filter(pk=job_id, status=Job.Status.CANCELLED).exists()
