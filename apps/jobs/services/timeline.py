"""The job's timeline: one ``StageEvent`` row (and one log line) per stage attempt or operator action."""

from __future__ import annotations

import logging
import os
import socket
from datetime import datetime

from django.utils import timezone

from apps.jobs.models import StageEvent

log = logging.getLogger(__name__)

WORKER = f"{socket.gethostname()}:{os.getpid()}"


def record(
    job_id,
    stage: str,
    *,
    started: datetime,
    page_id: int | None = None,
    outcome: str = "ok",
    error_code: str = "",
    actor: str = "",
    attempt: int = 1,
    detail: dict | None = None,
) -> None:
    now = timezone.now()
    StageEvent.objects.create(
        job_id=job_id,
        page_id=page_id,
        stage=stage,
        outcome=outcome,
        error_code=error_code,
        actor=actor,
        attempt=attempt,
        worker="" if actor else WORKER,
        detail=detail or {},
        started_at=started,
        finished_at=now,
        duration_ms=max(0, int((now - started).total_seconds() * 1000)),
    )
    extra = {"stage": stage, "outcome": outcome, "attempt": attempt, "job_id": str(job_id)}
    if page_id is not None:
        extra["page_id"] = page_id
    log.log(logging.WARNING if outcome == "failed" else logging.INFO, "%s %s", stage, outcome, extra=extra)
