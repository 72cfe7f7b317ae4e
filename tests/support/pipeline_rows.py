"""Job and page rows in the states a crash or a lost message leaves behind, for tests that run a
stage or the sweep in this process against the real database."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from django.conf import settings
from django.core.files.storage import default_storage
from django.utils import timezone

from apps.jobs import services
from apps.jobs.documents import encode_png
from apps.jobs.models import Job, Page


def long_ago() -> timezone.datetime:
    return timezone.now() - timedelta(seconds=settings.OCR_STALE_AFTER + 60)


def make_job(status: str, page_count: int, pages: list[tuple[str, int]], stale: bool = True) -> Job:
    """A job in ``status`` with ``pages`` as (status, attempts); rows aged past OCR_STALE_AFTER."""
    job = Job.objects.create(
        status=status, filename="x.tif", kind="tiff", sha256="0" * 64, page_count=page_count, source="sources/x.tif"
    )
    for index, (page_status, attempts) in enumerate(pages):
        Page.objects.create(job=job, index=index, status=page_status, attempts=attempts)
    if stale:
        Page.objects.filter(job=job).update(updated_at=long_ago(), claimed_at=long_ago())
        Job.objects.filter(pk=job.pk).update(updated_at=long_ago())
    return job


def page_of(job: Job, index: int = 0) -> Page:
    return Page.objects.get(job=job, index=index)


def png_of_text() -> bytes:
    """A page with dark blocks on white: something for the layout detector to find."""
    img = np.full((800, 600, 3), 255, dtype=np.uint8)
    for y in range(80, 700, 60):
        img[y : y + 20, 60:540] = 30
    return encode_png(img)


def page_with_image(data: bytes | None) -> Page:
    job = make_job("running", 1, [("queued", 0)], stale=False)
    page = page_of(job)
    page.image = services.save_bytes(f"pages/{job.pk}/00000.png", data or png_of_text())
    page.save()
    if data is None:
        default_storage.delete(page.image.name)  # its row names a file that is gone
    return page
