"""Region rows from what the engines found, and a page's stored image for them to read.

Shared by the stages that write regions: ingest (text-layer pages), layout (boxes without text)
and recognition (text for those boxes, plus text found outside them).
"""

from __future__ import annotations

import numpy as np
from django.conf import settings
from django.core.files.storage import default_storage

from apps.jobs.documents import decode_png
from apps.jobs.models import Page, Region
from ocrsite.vocabulary import ErrorCode
from workers.content.order import reading_order
from workers.engines.base import EngineError, LayoutBox, RegionText


def write_regions(page: Page, found: list[tuple[LayoutBox, RegionText | None]], *, source: str, engine: str) -> None:
    """Replace the page's regions (a redelivered stage rewrites, never appends), in one insert
    rather than one a row: a born-digital page's text blocks or a layout pass's boxes are often
    tens of rows."""
    page.regions.all().delete()
    order = order_of([box for box, _ in found])
    Region.objects.bulk_create(
        [region_row(page, rank, *found[i], source=source, engine=engine) for rank, i in enumerate(order)]
    )


def create_region(
    page: Page, order: int, box: LayoutBox, text: RegionText | None, *, source: str, engine: str
) -> Region:
    region = region_row(page, order, box, text, source=source, engine=engine)
    region.save(force_insert=True)
    return region


def region_row(page: Page, order: int, box: LayoutBox, text: RegionText | None, *, source: str, engine: str) -> Region:
    """The region's row, not yet saved."""
    x0, y0, x1, y1 = box.bbox
    return Region(
        page=page,
        order=order,
        label=box.label,
        x0=x0,
        y0=y0,
        x1=x1,
        y1=y1,
        polygon=[list(p) for p in box.polygon] if box.polygon else None,
        score=box.score,
        # Kept on the row: recognition rebuilds boxes from rows and must not read skip/abandon.
        task=box.task or "",
        text=text.text if text else "",
        confidence=text.confidence if text else None,
        status=Region.Status.DONE if text else Region.Status.PENDING,
        source=source,
        engine=engine if text else "",
        flags=list(text.flags) if text else [],
        latency_ms=text.latency_ms if text else None,
        table=text.table if text else None,
    )


def apply_text(region: Region, text: RegionText, engine: str) -> None:
    region.text = text.text
    region.confidence = text.confidence
    region.flags = list(text.flags)
    region.latency_ms = text.latency_ms
    region.table = text.table
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
            "table",
            "engine",
            "status",
            "attempts",
            "error_code",
            "error_message",
            "updated_at",
        ]
    )


def renumber(page: Page) -> None:
    regions = list(page.regions.all())
    boxes = [LayoutBox(r.label, r.bbox, r.score) for r in regions]
    for rank, i in enumerate(order_of(boxes)):
        if regions[i].order != rank:
            regions[i].order = rank
            regions[i].save(update_fields=["order", "updated_at"])


def order_of(boxes: list[LayoutBox]) -> list[int]:
    """An engine's own reading order when every box has one; ours (XY-cut) otherwise."""
    if boxes and all(b.order is not None for b in boxes):
        return sorted(range(len(boxes)), key=lambda i: boxes[i].order)
    return reading_order([b.bbox for b in boxes])


def box_of(region: Region) -> LayoutBox:
    polygon = tuple(tuple(p) for p in region.polygon) if region.polygon else None
    return LayoutBox(
        label=region.label, bbox=region.bbox, score=region.score, polygon=polygon, task=region.task or None
    )


def load_image(page: Page) -> np.ndarray:
    """The page's stored image. Its absence or damage is this page's permanent failure, so that
    in a batched pass it fails alone; a storage connection error stays transient (retried)."""
    if not page.image:
        raise EngineError(ErrorCode.PAGE_NO_IMAGE, f"page {page.index + 1} has no stored image", permanent=True)
    try:
        with default_storage.open(page.image.name, "rb") as fh:
            data = fh.read()
    except Exception:
        # Each backend says "missing" its own way (OSError, botocore, azure-core): ask it plainly.
        # Anything else (storage unreachable) propagates and is retried as transient.
        if default_storage.exists(page.image.name):
            raise
        raise EngineError(
            ErrorCode.PAGE_NO_IMAGE, f"page {page.index + 1}: {page.image.name} is gone from storage", permanent=True
        ) from None
    try:
        # Twice the limit ingest stored under: lowering it leaves the pages already stored readable.
        return decode_png(data, 2 * settings.OCR_MAX_IMAGE_PIXELS)
    except (OSError, ValueError) as exc:
        raise EngineError(
            ErrorCode.PAGE_BAD_IMAGE, f"page {page.index + 1}: stored image unreadable: {exc}", permanent=True
        ) from exc
