"""The sweep [queue: cpu, every OCR_SWEEP_EVERY s from beat]: work whose message was lost.

Messages can vanish (Redis restarted without persistence) and workers can die holding a claim.
The database knows what should be happening, so the sweep re-sends whatever has waited longer
than OCR_STALE_AFTER: stale claims are handed back (or, with their attempts spent, fail as
``page:stalled``), waiting pages go to their queue again, jobs stuck before or after their pages
get ingest or assembly again. Duplicates this may create are harmless: every stage claims by
compare-and-set. (The retention purge, the other beat task, is ``workers.retention``.)

A backlog is not a loss: work waiting longer than OCR_STALE_AFTER behind a long queue still has
its message in it. So what waits is re-sent only into the room a queue has below BATCH messages
(``_room``): at once after a Redis restart (the queue comes back empty), once a backlog drains
otherwise. Re-sending each waiting row every OCR_STALE_AFTER instead piled copies in the queues
faster than they drained, and assembly waited behind them (docs/benchmarks.md, fault tests).
Stale claims are handed back whatever the queues hold.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Count, F
from django.utils import timezone

from apps.jobs import batches, enqueue, monitoring, services, states
from apps.jobs.models import Job, Page
from ocrsite.celery import app
from ocrsite.vocabulary import ErrorCode, Queue, TaskName
from workers.retry import PipelineTask, policy

BATCH = 1000  # rows per kind per sweep: a backlog drains over several sweeps, never in one query


@app.task(base=PipelineTask, name=TaskName.SWEEP.value, max_retries=0)
def sweep() -> dict:
    """Beat: re-send stale or lost work; returns what it did, by kind."""
    return resend_lost_work()


def resend_lost_work() -> dict[str, int]:
    now = timezone.now()
    stale = now - timedelta(seconds=settings.OCR_STALE_AFTER)
    counts: dict[str, int] = {}
    resend: dict[states.PageStatus, list[int]] = {status: [] for status in states.PAGE_WAITS_FOR}
    # Claims held past the hard time limit: the worker died or hung. Hand them back and send them
    # again now (releasing touches updated_at, so the waiting-page query below would skip them).
    max_attempts = policy().max_attempts
    for claimed, release in states.RELEASE.items():
        stuck = Page.objects.filter(status=claimed, updated_at__lt=stale, job__status=Job.Status.RUNNING)
        spent = list(stuck.filter(attempts__gte=max_attempts).values_list("pk", flat=True)[:BATCH])
        for page_id in spent:
            message = f"no worker finished this page in {max_attempts} attempts (each died or hung)"
            fail = states.LAYOUT_FAILED if claimed == states.PageStatus.DETECTING else states.RECOGNITION_FAILED
            services.finish_page(page_id, fail, error=(ErrorCode.PAGE_STALLED, message))
        ids = list(stuck.filter(attempts__lt=max_attempts).values_list("pk", flat=True)[:BATCH])
        back = services.release_pages(ids, claimed)
        resend[release.to] += back
        counts[f"released_{claimed}"] = len(back)
        counts[f"stalled_{claimed}"] = len(spent)
    room = _room()
    # Each lane's work goes back to its own queues, into that lane's room: a batch's backlog
    # neither takes the online queues' room nor lands on them.
    sent_pages: dict[states.PageStatus, int] = dict.fromkeys(states.PAGE_WAITS_FOR, 0)
    ingest_all: list = []
    assemble_all: list = []
    bulk_claimed = set(
        Page.objects.filter(pk__in=[pk for ids in resend.values() for pk in ids], job__batch__isnull=False).values_list(
            "pk", flat=True
        )
    )
    for bulk in (False, True):
        lane_room = dict.fromkeys(Queue, room[Queue.BULK]) if bulk else room
        mine = {status: [pk for pk in ids if (pk in bulk_claimed) == bulk] for status, ids in resend.items()}
        waiting = Page.objects.filter(updated_at__lt=stale, job__status=Job.Status.RUNNING, job__batch__isnull=not bulk)
        for status, queue in states.PAGE_WAITS_FOR.items():
            take = max(0, lane_room[queue] - len(mine[status]))
            mine[status] += list(waiting.filter(status=status).values_list("pk", flat=True)[:take])
        jobs = Job.objects.filter(updated_at__lt=stale, batch__isnull=not bulk)
        ingest, assemble = _lost_jobs(jobs, lane_room[Queue.CPU])
        with enqueue.lane(enqueue.lane_of(bulk=bulk)):
            enqueue.detect_layout(mine[states.PageStatus.QUEUED])
            enqueue.recognize(mine[states.PageStatus.DETECTED])
            for job_id in ingest:
                enqueue.ingest(job_id)
            for job_id in assemble:
                enqueue.assemble(job_id)
        # Touch what we re-sent so the next sweep waits a full period before sending it again.
        Page.objects.filter(pk__in=[pk for ids in mine.values() for pk in ids]).update(updated_at=now)
        # Touch them too, as for pages: without it every sweep (every few seconds) re-sent every job
        # of a backlog that waits longer than OCR_STALE_AFTER, and the copies buried the real work.
        Job.objects.filter(pk__in=ingest + assemble).update(updated_at=now)
        for status, ids in mine.items():
            sent_pages[status] += len(ids)
        ingest_all += ingest
        assemble_all += assemble
    # A batch whose expansion message was lost (its poll stopped) gets it again.
    expansions = batches.stalled_expansions(settings.OCR_STALE_AFTER)
    for batch_id in expansions:
        batches.send_expansion(batch_id)
    counts.update(
        layout=sent_pages[states.PageStatus.QUEUED],
        recognize=sent_pages[states.PageStatus.DETECTED],
        ingest=len(ingest_all),
        assemble=len(assemble_all),
        batches=len(expansions),
    )
    return counts


def _lost_jobs(jobs, cpu_room: int) -> tuple[list, list]:
    """Jobs (of one lane) whose ingest or assembly message is lost: (ingest, assemble)."""
    # Ingest and assembly share the cpu queue's room; assembly first: it finishes jobs.
    assemble = list(jobs.filter(status=Job.Status.ASSEMBLING).values_list("pk", flat=True)[:cpu_room])
    cpu_room -= len(assemble)
    ingest = list(jobs.filter(status=Job.Status.QUEUED).values_list("pk", flat=True)[:cpu_room])
    cpu_room -= len(ingest)
    # A running job with pages still missing lost its ingest (the worker died mid-split, or the
    # message was lost after the job was claimed): ingest again; it skips the pages it made.
    ingest += list(
        jobs.filter(status=Job.Status.RUNNING)
        .annotate(made=Count("pages"))
        .filter(made__lt=F("page_count"))
        .values_list("pk", flat=True)[: max(0, cpu_room)]
    )
    # Jobs whose stage died on every delivery fail job:stalled instead of being sent once more.
    return services.within_attempts(ingest, "ingest"), services.within_attempts(assemble, "assembly")


def _room() -> dict[Queue, int]:
    """Messages the sweep may add to each queue now: BATCH less what already waits there (BATCH
    each when the depths cannot be read: a broker that is not Redis, or one that is down)."""
    depths = monitoring.queue_depths()
    if depths is None:
        return dict.fromkeys(Queue, BATCH)
    return {queue: max(0, BATCH - depths.get(queue.value, 0)) for queue in Queue}
