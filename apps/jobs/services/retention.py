"""Retention: finished jobs past OCR_RETENTION_DAYS lose their payloads; rows and timelines stay."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from apps.jobs.models import Job
from apps.jobs.services.actions import purge

# The timeline's actor for purges made by the retention schedule rather than an operator.
RETENTION_ACTOR = "retention"


@dataclass(frozen=True)
class Purged:
    jobs: int
    # Finished jobs past retention still unpurged after this run (the next run takes them).
    left: int


def purge_expired(*, days: int, batch: int, now: datetime | None = None) -> Purged:
    """Purge up to ``batch`` finished jobs created more than ``days`` days ago, oldest first.

    Active jobs are left alone however old (the sweep's business); a job already purged is never
    picked again, so running this twice, or in two workers at once, purges each job once.
    """
    cutoff = (now or timezone.now()) - timedelta(days=days)
    due = Job.objects.filter(created_at__lt=cutoff, purged_at__isnull=True, status__in=Job.TERMINAL)
    ids = list(due.order_by("created_at").values_list("pk", flat=True)[:batch])
    done = sum(purge(job_id, actor=RETENTION_ACTOR) for job_id in ids)
    return Purged(jobs=done, left=due.count())
