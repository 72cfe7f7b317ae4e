"""The Job and Page state machines, declared once.

Statuses, the named moves between them, and which queue a waiting status waits for. The stages,
the sweep, monitoring, the throttles and the admin read these; ``apps.jobs.services`` applies
each move as one conditional UPDATE (compare-and-set).

A page's life::

    QUEUED ──claim──► DETECTING ──layout done──► DETECTED ──claim──► RECOGNIZING ──► DONE
       │  ◄──release──┘   └──layout failed──► FAILED   ◄──release──┘       └────────► FAILED
       └──skip layout (one-stage page models)──► DETECTED

Text-layer pages are written in RECOGNIZING by ingest and finish at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models

from ocrsite.vocabulary import Queue


class JobStatus(models.TextChoices):
    QUEUED = "queued"  # waiting for ingest
    RUNNING = "running"  # split into pages; pages move on their own
    ASSEMBLING = "assembling"  # every page done; waiting for assembly
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class PageStatus(models.TextChoices):
    QUEUED = "queued"  # waiting for layout
    DETECTING = "detecting"
    DETECTED = "detected"  # waiting for recognition
    RECOGNIZING = "recognizing"
    DONE = "done"
    FAILED = "failed"


JOB_ACTIVE = (JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.ASSEMBLING)
JOB_TERMINAL = (JobStatus.DONE, JobStatus.FAILED, JobStatus.CANCELLED)
PAGE_TERMINAL = (PageStatus.DONE, PageStatus.FAILED)


@dataclass(frozen=True)
class PageMove:
    """One named edge of the page state machine."""

    name: str
    frm: PageStatus
    to: PageStatus


CLAIM_FOR_LAYOUT = PageMove("claim for layout", PageStatus.QUEUED, PageStatus.DETECTING)
LAYOUT_DONE = PageMove("layout done", PageStatus.DETECTING, PageStatus.DETECTED)
LAYOUT_FAILED = PageMove("layout failed", PageStatus.DETECTING, PageStatus.FAILED)
SKIP_LAYOUT = PageMove("skip layout", PageStatus.QUEUED, PageStatus.DETECTED)
CLAIM_FOR_RECOGNITION = PageMove("claim for recognition", PageStatus.DETECTED, PageStatus.RECOGNIZING)
RECOGNIZED = PageMove("recognized", PageStatus.RECOGNIZING, PageStatus.DONE)
RECOGNITION_FAILED = PageMove("recognition failed", PageStatus.RECOGNIZING, PageStatus.FAILED)

# A claim handed back: by a stage after a transient failure, or by the sweep when its worker died.
RELEASE = {
    PageStatus.DETECTING: PageMove("release layout claim", PageStatus.DETECTING, PageStatus.QUEUED),
    PageStatus.RECOGNIZING: PageMove("release recognition claim", PageStatus.RECOGNIZING, PageStatus.DETECTED),
}

# Pages of a running job in these statuses wait for a message on that queue; jobs likewise.
PAGE_WAITS_FOR: dict[PageStatus, Queue] = {PageStatus.QUEUED: Queue.LAYOUT, PageStatus.DETECTED: Queue.OCR}
JOB_WAITS_FOR: dict[JobStatus, Queue] = {JobStatus.QUEUED: Queue.CPU, JobStatus.ASSEMBLING: Queue.CPU}
