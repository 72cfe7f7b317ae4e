"""Batches: many documents under one set of options, on the bulk lane.

``create_batch`` checks the source against the tenant's allowed storage prefixes and records it;
``expand`` (the ``workers.expand_batch`` task, on the bulk queue, re-sent every
OCR_BATCH_POLL_SECONDS while the batch runs) turns the next items into jobs while fewer than
OCR_BATCH_WINDOW of the batch's jobs are unfinished, and ends the batch once every item has ended.
Every job of a batch runs on the bulk lane (``enqueue.lane``): its own queue, served by workers
that take only the capacity online work leaves.

An item is a job exactly once: ``(batch, batch_item)`` is unique, and the cursor moves only
after its chunk's jobs exist, so an expansion that dies redoes part of a chunk and makes no
second job. A re-run batch (a new batch over the same objects) is answered from the result cache
for every document already read (``services.result_cache``).

An item that cannot be read (no object, refused by the probe) becomes a failed job with its
stable code, so every item is accounted for: pages in = done + failed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import PurePosixPath

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q, Sum
from django.urls import reverse
from django.utils import timezone

from apps.jobs import direct_uploads, enqueue, services
from apps.jobs.documents import InputError, probe
from apps.jobs.models import Batch, Job, Page
from ocrsite import telemetry
from ocrsite.cputime import cpu_seconds
from ocrsite.vocabulary import ErrorCode, Queue, TaskName

log = logging.getLogger(__name__)

_SPOOL_CHUNK = 1 << 20


def _clean_prefix(prefix: str) -> str:
    prefix = prefix.strip().lstrip("/")
    if any(part == ".." for part in prefix.split("/")):
        raise InputError(ErrorCode.BATCH_PREFIX_NOT_ALLOWED, "a prefix or key may not contain '..'")
    return prefix


def _allowed(key: str, allowed_prefixes: list[str]) -> bool:
    return any(key.startswith(p) for p in allowed_prefixes)


def create_batch(
    *,
    tenant: str,
    owner=None,
    engine: str | None = None,
    options: dict | None = None,
    prefix: str | None = None,
    keys: list[str] | None = None,
    uploads: list[str] | None = None,
    allowed_prefixes: list[str],
) -> Batch:
    """Record a batch and send its first expansion. Raises ``InputError`` for what we refuse:
    a prefix or key outside the tenant's ``allowed_prefixes``, an empty or oversized list, or
    upload ids that are not the tenant's."""
    given = [s for s in (prefix, keys, uploads) if s is not None]
    if len(given) != 1:
        raise InputError(ErrorCode.REQUEST_INVALID, "give exactly one of prefix, keys or uploads")
    batch = Batch(tenant=tenant, owner=owner, engine=engine or settings.OCR_ENGINE, options=options or {})
    if prefix is not None:
        prefix = _clean_prefix(prefix)
        if not prefix or not _allowed(prefix, allowed_prefixes):
            raise InputError(ErrorCode.BATCH_PREFIX_NOT_ALLOWED, "this prefix is outside the tenant's batch prefixes")
        batch.source, batch.prefix = Batch.Source.PREFIX, prefix
    else:
        items = [str(i) for i in (keys if keys is not None else uploads)]
        if not items:
            raise InputError(ErrorCode.BATCH_EMPTY, "the batch names no documents")
        if len(items) > settings.OCR_BATCH_MAX_ITEMS:
            raise InputError(
                ErrorCode.BATCH_TOO_MANY_ITEMS,
                f"{len(items)} items; a list may name {settings.OCR_BATCH_MAX_ITEMS} (use a prefix for more)",
            )
        items = list(dict.fromkeys(items))
        if keys is not None:
            items = [_clean_prefix(k) for k in items]
            if outside := [k for k in items if not _allowed(k, allowed_prefixes)]:
                raise InputError(
                    ErrorCode.BATCH_PREFIX_NOT_ALLOWED,
                    f"{len(outside)} key(s) lie outside the tenant's batch prefixes, e.g. {outside[0][:200]!r}",
                )
            batch.source = Batch.Source.KEYS
        else:
            found = direct_uploads.tenant_upload_ids(tenant, items)
            if missing := [u for u in items if u not in found]:
                raise InputError(ErrorCode.UPLOAD_NOT_FOUND, f"no such upload for this tenant: {missing[0][:80]}")
            batch.source = Batch.Source.UPLOADS
        batch.items = items
    with transaction.atomic():
        batch.save()
        transaction.on_commit(lambda: send_expansion(batch.pk))
    log.info("batch created", extra={"batch_id": str(batch.pk), "source": batch.source})
    return batch


def send_expansion(batch_id, countdown: float | None = None) -> None:
    enqueue.send(TaskName.EXPAND_BATCH, str(batch_id), countdown=countdown)


# --- expansion ----------------------------------------------------------------------------------


def expand(batch_id) -> bool:
    """Make the next items' jobs, if the window has room; end the batch once every item ended.
    True while the batch runs (the task sends itself again after OCR_BATCH_POLL_SECONDS)."""
    batch = Batch.objects.filter(pk=batch_id, status=Batch.Status.RUNNING).first()
    if batch is None:
        return False
    active = batch.jobs.filter(status__in=Job.ACTIVE).count()
    room = min(settings.OCR_BATCH_EXPAND_CHUNK, settings.OCR_BATCH_WINDOW - active)
    if not batch.expanded and room > 0:
        items, cursor = _next_items(batch, room)
        with enqueue.lane(Queue.BULK):
            for item in items:
                if not Batch.objects.filter(pk=batch.pk, status=Batch.Status.RUNNING).exists():
                    return False  # cancelled meanwhile: make no more jobs
                _make_job(batch, item)
        # The cursor moves only after its chunk's jobs exist (a crash before this redoes them:
        # each item's unique row makes it a no-op).
        Batch.objects.filter(pk=batch.pk, cursor=batch.cursor).update(
            cursor=cursor,
            expanded=len(items) < room,
            items_expanded=batch.jobs.count(),
            updated_at=timezone.now(),
        )
        return True
    Batch.objects.filter(pk=batch.pk).update(updated_at=timezone.now())
    if batch.expanded and active == 0:
        now = timezone.now()
        if Batch.objects.filter(pk=batch.pk, status=Batch.Status.RUNNING).update(
            status=Batch.Status.DONE, finished_at=now, updated_at=now
        ):
            log.info("batch done", extra={"batch_id": str(batch.pk)})
        return False
    return True


def _next_items(batch: Batch, limit: int) -> tuple[list[str], str]:
    """Up to ``limit`` items after the cursor, and the cursor after them."""
    if batch.source == Batch.Source.PREFIX:
        keys = list_keys(batch.prefix, after=batch.cursor, limit=limit)
        return keys, keys[-1] if keys else batch.cursor
    start = int(batch.cursor or 0)
    items = batch.items[start : start + limit]
    return items, str(start + len(items))


def list_keys(prefix: str, *, after: str, limit: int) -> list[str]:
    """Object keys under ``prefix`` in the default storage, in key order, after ``after``.

    S3: ListObjects from the marker, one page at a time (never the whole prefix). Other
    backends: their listdir, walked in order (the local filesystem; Azure lists by name too)."""
    bucket = getattr(default_storage, "bucket", None)
    if bucket is not None and hasattr(default_storage, "_normalize_name"):
        base = default_storage._normalize_name("")
        base = base.rstrip("/") + "/" if base else ""
        rows = bucket.objects.filter(Prefix=base + prefix, Marker=base + after if after else "").limit(limit)
        return [obj.key[len(base) :] for obj in rows if not obj.key.endswith("/")]
    return _walk(prefix, after, limit)


def _walk(prefix: str, after: str, limit: int) -> list[str]:
    """Every key under the prefix's directory, sorted: for backends without a marker listing
    (the local filesystem of a single host), where the whole listing is cheap."""
    found: list[str] = []

    def visit(path: str) -> None:
        dirs, files = default_storage.listdir(path)
        found.extend(f"{path}/{f}" if path else f for f in files)
        for d in dirs:
            visit(f"{path}/{d}" if path else d)

    try:
        visit(prefix.rpartition("/")[0])
    except FileNotFoundError:
        return []
    return sorted(k for k in found if k.startswith(prefix) and k > after)[:limit]


def _make_job(batch: Batch, item: str) -> Job | None:
    """The item's job, created once (None if an earlier run made it), in a trace of its own.

    The expansion's CPU for the item (the object read and hashed, the probe, the rows) is the
    job's first cost: a batch's ``cpu_seconds`` would otherwise leave out the expansion's share of
    what its bulk workers spend, and an item refused here would cost nothing."""
    if batch.jobs.filter(batch_item=item).exists():
        return None
    started = cpu_seconds(children=True)
    with telemetry.new_trace("batch.item", batch_id=str(batch.pk), tenant=batch.tenant, item=item[:200]):
        job = _make_item_job(batch, item)
    spent = math.ceil((cpu_seconds(children=True) - started) * 1000)
    if job is not None and spent > 0:
        Job.objects.filter(pk=job.pk).update(cpu_ms=F("cpu_ms") + spent)
    return job


def _make_item_job(batch: Batch, item: str) -> Job | None:
    if batch.source == Batch.Source.UPLOADS:
        try:
            return direct_uploads.submit_uploaded(
                item,
                tenant=batch.tenant,
                owner=batch.owner,
                engine=batch.engine,
                options=batch.options,
                limits=services.default_limits(),
                batch=batch,
            )
        except InputError as exc:
            return _failed_item(batch, item, exc)
    try:
        return _job_from_object(batch, item)
    except InputError as exc:
        return _failed_item(batch, item, exc)


def _job_from_object(batch: Batch, key: str) -> Job | None:
    """A job whose source is the tenant's object in place: checked, hashed and probed from a
    spooled copy; the object is never moved, copied into sources/ or deleted by a purge."""
    limits = services.default_limits()
    try:
        size = default_storage.size(key)
    except Exception:  # each backend says "missing" its own way: ask it plainly
        if default_storage.exists(key):
            raise
        raise InputError(ErrorCode.BATCH_ITEM_MISSING, "no object under this key") from None
    if size > limits.max_bytes:
        raise InputError(ErrorCode.INPUT_TOO_LARGE, f"{size} bytes; the limit is {limits.max_bytes}")
    with tempfile.NamedTemporaryFile(prefix="ocr-batch-", suffix=".bin") as spool:
        digest = hashlib.sha256()
        with default_storage.open(key, "rb") as fh:
            for chunk in iter(lambda: fh.read(_SPOOL_CHUNK), b""):
                digest.update(chunk)
                spool.write(chunk)
        spool.flush()
        spool.seek(0)
        found = probe(spool, max_pages=limits.max_pages, max_pixels=settings.OCR_MAX_IMAGE_PIXELS)
    request = services.JobRequest(
        owner=batch.owner,
        tenant=batch.tenant,
        engine=batch.engine,
        options=batch.options,
        batch=batch,
        batch_item=key,
    )
    name = services.clean_filename(PurePosixPath(key).name)
    try:
        return services.create_job(request, InPlace(name, digest.hexdigest(), size, found, key))
    except IntegrityError:
        return None  # a concurrent expansion made this item's job


@dataclass(frozen=True)
class InPlace(services.Source):
    """The tenant's own object, read where it lies: never copied into sources/, never deleted."""

    key: str

    def attach(self, job: Job) -> None:
        job.source.name = self.key


def _failed_item(batch: Batch, item: str, exc: InputError) -> Job | None:
    now = timezone.now()
    job = Job(
        owner=batch.owner,
        tenant=batch.tenant,
        engine=batch.engine,
        options=batch.options,
        filename=services.clean_filename(PurePosixPath(item).name),
        status=Job.Status.FAILED,
        error_code=exc.code,
        error_message=exc.message[:2000],
        finished_at=now,
        batch=batch,
        batch_item=item,
    )
    if batch.source != Batch.Source.UPLOADS:
        job.source.name = item  # the object refused, for the console; never deleted (it is the tenant's)
    try:
        with transaction.atomic():
            job.save()
    except IntegrityError:
        return None
    log.info("batch item refused", extra={"batch_id": str(batch.pk), "error_code": exc.code})
    return job


# --- what a client sees ------------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    jobs: dict[str, int]  # by status
    items: int  # items made into jobs so far
    expanded: bool
    pages_in: int
    pages_done: int
    pages_failed: int  # failed pages, and the pages of failed jobs that never reached a page stage
    pages_cancelled: int
    cpu_seconds: float
    gpu_seconds: float

    @property
    def fraction(self) -> float:
        if not self.expanded or not self.items:
            return 0.0
        ended = sum(n for status, n in self.jobs.items() if status in Job.TERMINAL)
        return round(ended / self.items, 4)


def progress(batch: Batch) -> Progress:
    rows = batch.jobs.values("status").annotate(
        n=Count("pk"), pages=Sum("page_count"), done=Sum("pages_done"), failed=Sum("pages_failed")
    )
    jobs = dict.fromkeys(Job.Status.values, 0)
    pages_in = pages_done = pages_failed = pages_cancelled = 0
    for row in rows:
        jobs[row["status"]] = row["n"]
        pages, done, failed = row["pages"] or 0, row["done"] or 0, row["failed"] or 0
        pages_in += pages
        pages_done += done
        if row["status"] == Job.Status.FAILED:
            pages_failed += pages - done  # a failed job's unread pages are failed pages
        elif row["status"] == Job.Status.CANCELLED:
            pages_failed += failed
            pages_cancelled += pages - done - failed
        else:
            pages_failed += failed
    jobs_ms = batch.jobs.aggregate(ms=Sum("cpu_ms"))["ms"] or 0
    pages = Page.objects.filter(job__batch=batch).aggregate(cpu=Sum("cpu_ms"), gpu=Sum("gpu_ms"))
    return Progress(
        cpu_seconds=round((jobs_ms + (pages["cpu"] or 0)) / 1000, 3),
        gpu_seconds=round((pages["gpu"] or 0) / 1000, 3),
        jobs=jobs,
        items=sum(jobs.values()),
        expanded=batch.expanded,
        pages_in=pages_in,
        pages_done=pages_done,
        pages_failed=pages_failed,
        pages_cancelled=pages_cancelled,
    )


def cancel_batch(batch_id, actor: str = "") -> bool:
    """Running → cancelled: no more items become jobs, and the unfinished jobs are cancelled."""
    now = timezone.now()
    if not Batch.objects.filter(pk=batch_id, status=Batch.Status.RUNNING).update(
        status=Batch.Status.CANCELLED, finished_at=now, updated_at=now
    ):
        return False
    active = Job.objects.filter(batch_id=batch_id, status__in=Job.ACTIVE)
    for job_id in active.values_list("pk", flat=True).iterator(chunk_size=1000):
        services.cancel(job_id, actor=actor or "batch-cancel")
    return True


def manifest_lines(batch: Batch, request=None) -> Iterator[str]:
    """One JSON line per item, in item order: its job, status, pages, error code and result links."""

    def absolute(path: str) -> str:
        return request.build_absolute_uri(path) if request is not None else path

    fields = ("pk", "batch_item", "status", "page_count", "pages_done", "pages_failed", "error_code", "sha256")
    rows = batch.jobs.order_by("batch_item").values(*fields, "cached_from_id")
    for row in rows.iterator(chunk_size=2000):
        line = {
            "item": row["batch_item"],
            "job": str(row["pk"]),
            "status": row["status"],
            "pages": row["page_count"],
            "pages_done": row["pages_done"],
            "pages_failed": row["pages_failed"],
            "error": row["error_code"] or None,
            "sha256": row["sha256"],
            "cached": row["cached_from_id"] is not None,
        }
        if row["status"] == Job.Status.DONE:
            result = reverse("job-result", args=[row["pk"]])
            line["markdown"] = absolute(f"{result}?format=markdown")
            line["json"] = absolute(f"{result}?format=json")
        yield json.dumps(line) + "\n"


def stalled_expansions(stale_after_s: int) -> list:
    """Running batches whose expansion has not run for ``stale_after_s``: its message was lost."""
    cutoff = timezone.now() - timedelta(seconds=stale_after_s)
    return list(
        Batch.objects.filter(Q(status=Batch.Status.RUNNING), updated_at__lt=cutoff).values_list("pk", flat=True)
    )
