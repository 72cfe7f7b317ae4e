"""Documents sent straight to object storage: a slot per upload, then a job from the slot.

The web tier never carries the bytes. ``open_slot`` records what the client declared (tenant,
exact size, content type, expiry); the API presigns a URL for the slot's key; the client sends
the bytes to the bucket; ``submit_uploaded`` checks the stored object against the declaration
(size, magic bytes, written before the expiry), probes it from a spooled temp file, and creates
the job pointing at the object in place (no copy). A slot makes one job: the claim is a
conditional UPDATE, so two racing requests get the same job.

Objects no job took are deleted by ``discard_unused`` (beat, ``workers.discard_uploads``): a slot
whose bytes were refused, once its URL has expired (no new bytes can arrive), and any slot still
without a job OCR_UPLOAD_KEEP_UNUSED_SECONDS after its expiry. The sweep takes a slot with the same
kind of conditional UPDATE as the job's claim, so of a job made from the slot and its deletion
exactly one happens.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.files.storage import default_storage
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from apps.jobs import services
from apps.jobs.documents import CONTENT_TYPES, SNIFF_BYTES, InputError, Probe, probe, sniff
from apps.jobs.models import DirectUpload, Job
from ocrsite.vocabulary import ErrorCode

log = logging.getLogger(__name__)

# A clock that runs a little ahead on the storage side must not refuse an upload made in time.
EXPIRY_SKEW = timedelta(seconds=30)
_SPOOL_CHUNK = 1 << 20


def open_slot(
    *, tenant: str, owner, filename: str, size: int, content_type: str, limits: services.Limits
) -> DirectUpload:
    """Record a slot for one document; the caller presigns its ``key``. Raises ``InputError``."""
    if content_type not in CONTENT_TYPES.values():
        raise InputError(
            ErrorCode.INPUT_UNSUPPORTED_TYPE,
            f"content_type must be one of {', '.join(sorted(set(CONTENT_TYPES.values())))}",
        )
    if size <= 0:
        raise InputError(ErrorCode.INPUT_EMPTY, "size must be at least 1 byte")
    if size > limits.max_bytes:
        raise InputError(ErrorCode.INPUT_TOO_LARGE, f"{size} bytes; the limit is {limits.max_bytes}")
    slot_id = uuid.uuid4()
    return DirectUpload.objects.create(
        id=slot_id,
        tenant=tenant,
        owner=owner,
        filename=services.clean_filename(filename),
        content_type=content_type,
        size_bytes=size,
        # The name is ours and unguessable; the client's filename never reaches a path.
        key=f"uploads/{slot_id}",
        expires_at=timezone.now() + timedelta(seconds=settings.OCR_UPLOAD_URL_SECONDS),
    )


def submit_uploaded(
    upload_id,
    *,
    tenant: str,
    owner=None,
    engine: str | None = None,
    options: dict | None = None,
    limits: services.Limits,
    admit: services.Admit | None = None,
    idempotency_key: str = "",
    batch=None,
) -> Job:
    """The job for an uploaded slot (created once; asked again, the same job, ``replayed``).

    With an ``idempotency_key``, the tenant's recent job under that key for the same bytes is the
    answer (a client resuming a batch uploads again, into a new slot, and gets its first job).

    Refusals, each an ``InputError`` with a stable code: another tenant's or an unknown slot
    (``upload:not-found``), no object yet (``upload:missing``), an object of another size than
    declared (``upload:size-mismatch``), written after the expiry (``upload:expired``), bytes
    that are not the declared type (``input:type-mismatch``), then the probe's own refusals.
    """
    slot = DirectUpload.objects.filter(pk=upload_id, tenant=tenant).first()
    if slot is None:
        raise InputError(ErrorCode.UPLOAD_NOT_FOUND, "no such upload for this tenant")
    if slot.job_id:
        return _replayed(slot.job)
    if slot.discarded_at:
        raise _discarded()
    if not default_storage.exists(slot.key):
        raise InputError(ErrorCode.UPLOAD_MISSING, "nothing was uploaded for this upload id yet")
    try:
        digest, found = _check(slot, limits)
    except InputError as refusal:
        # Recorded for the upload sweep: refused bytes are deleted once the URL has expired.
        DirectUpload.objects.filter(pk=slot.pk, job__isnull=True).update(refused_code=refusal.code)
        raise
    except Exception:
        # The object vanished while read: the upload sweep took the slot meanwhile.
        if DirectUpload.objects.filter(pk=slot.pk, discarded_at__isnull=False).exists():
            raise _discarded() from None
        raise
    request = services.JobRequest(
        owner=owner,
        tenant=tenant,
        engine=engine,
        options=options,
        idempotency_key=idempotency_key,
        batch=batch,
        batch_item=str(slot.pk) if batch else "",
    )
    return services.create_job(request, Uploaded(slot.filename, digest, slot.size_bytes, found, slot), admit=admit)


def tenant_upload_ids(tenant: str, ids: list[str]) -> set[str]:
    """Of ``ids``, those that name the tenant's upload slots (malformed ids name none)."""
    valid = {}
    for i in ids:
        try:
            valid[i] = uuid.UUID(i)
        except ValueError:
            continue
    found: set[uuid.UUID] = set()
    pks = list(valid.values())
    for start in range(0, len(pks), 1000):
        found |= set(
            DirectUpload.objects.filter(tenant=tenant, pk__in=pks[start : start + 1000]).values_list("pk", flat=True)
        )
    return {i for i, pk in valid.items() if pk in found}


@dataclass(frozen=True)
class Uploaded(services.Source):
    """Bytes a client sent to the slot's key: the job points at them in place (no copy). The slot
    makes one job: another request for it, or the upload sweep, may take it first."""

    slot: DirectUpload

    def attach(self, job: Job) -> None:
        job.source.name = self.slot.key

    def claim(self, job: Job) -> bool:
        # The same condition as the upload sweep's: a slot it took makes no job.
        return bool(
            DirectUpload.objects.filter(pk=self.slot.pk, job__isnull=True, discarded_at__isnull=True).update(
                job=job, refused_code=""
            )
        )

    def taken(self) -> Job:
        # A concurrent request consumed the slot first (its job is the answer), or the sweep took it.
        slot = DirectUpload.objects.select_related("job").get(pk=self.slot.pk)
        if slot.job is None:
            raise _discarded()
        return _replayed(slot.job)


def _check(slot: DirectUpload, limits: services.Limits) -> tuple[str, Probe]:
    """The stored object against the slot's declaration, then probed: (sha256, probe)."""
    size = default_storage.size(slot.key)
    if size != slot.size_bytes:
        raise InputError(ErrorCode.UPLOAD_SIZE_MISMATCH, f"{size} bytes arrived; {slot.size_bytes} were declared")
    if size > limits.max_bytes:
        raise InputError(ErrorCode.INPUT_TOO_LARGE, f"{size} bytes; the limit is {limits.max_bytes}")
    if default_storage.get_modified_time(slot.key) > slot.expires_at + EXPIRY_SKEW:
        raise InputError(ErrorCode.UPLOAD_EXPIRED, "the bytes arrived after the upload URL expired")

    with tempfile.NamedTemporaryFile(prefix="ocr-upload-", suffix=".bin") as spool:
        digest = _spool(slot.key, spool)
        spool.seek(0)
        kind = sniff(spool.read(SNIFF_BYTES))
        if kind is not None and CONTENT_TYPES[kind] != slot.content_type:
            raise InputError(
                ErrorCode.INPUT_TYPE_MISMATCH, f"declared {slot.content_type}, but the bytes are {CONTENT_TYPES[kind]}"
            )
        found = probe(
            spool,
            max_pages=limits.max_pages,
            max_pixels=settings.OCR_MAX_IMAGE_PIXELS,
            pixels_per_byte=settings.OCR_IMAGE_PIXELS_PER_BYTE,
        )
    return digest, found


def _discarded() -> InputError:
    return InputError(ErrorCode.UPLOAD_EXPIRED, "this upload expired unused and its object was deleted")


@dataclass(frozen=True)
class Discarded:
    uploads: int  # slots whose object this run deleted
    left: int  # slots due still waiting (the next run takes them)


def discard_unused(*, keep_unused: timedelta, batch: int, now: datetime | None = None) -> Discarded:
    """Delete the objects of up to ``batch`` slots no job took, oldest expiry first: refused ones
    once their URL has expired, the others ``keep_unused`` after it. Each slot is recorded
    (``discarded_at``) before its object goes; an object a job reads is never deleted.
    """
    now = now or timezone.now()
    unused = DirectUpload.objects.filter(job__isnull=True, discarded_at__isnull=True)
    due = unused.filter(
        Q(expires_at__lt=now - keep_unused) | (~Q(refused_code="") & Q(expires_at__lt=now - EXPIRY_SKEW))
    ).exclude(
        # Belt and braces: a job made from the slot sets ``job`` in the same transaction, but the
        # object is a job's source whatever the slot row says (jobs since the slot only: indexed).
        Exists(Job.objects.filter(source=OuterRef("key"), created_at__gte=OuterRef("created_at")))
    )
    done = 0
    for slot in due.order_by("expires_at")[:batch]:
        # The claim: of this and a job's claim of the slot (same condition), one wins.
        if not unused.filter(pk=slot.pk).update(discarded_at=now):
            continue
        try:
            default_storage.delete(slot.key)  # absent (never sent): nothing to do, no error
        except Exception:
            # The slot stays recorded; the object is left for an operator (logged with its key).
            log.exception("upload object not deleted", extra={"upload_id": str(slot.pk), "key": slot.key})
            continue
        done += 1
        log.info(
            "upload object deleted",
            extra={"upload_id": str(slot.pk), "refused": slot.refused_code or "unused"},
        )
    return Discarded(uploads=done, left=due.count())


def _replayed(job: Job) -> Job:
    job.replayed = True
    return job


def _spool(name: str, spool) -> str:
    """Copy the stored object to ``spool`` in chunks; returns its sha256."""
    digest = hashlib.sha256()
    with default_storage.open(name, "rb") as fh:
        for chunk in iter(lambda: fh.read(_SPOOL_CHUNK), b""):
            digest.update(chunk)
            spool.write(chunk)
    spool.flush()
    return digest.hexdigest()


__all__ = ["Discarded", "discard_unused", "open_slot", "submit_uploaded"]
