"""Uploads: size enforced while a multipart body streams in, and direct-to-storage slots.

A direct upload is presigned for the storage backend in use:
- S3: a presigned POST whose policy pins the key, the exact size (content-length-range) and
  the Content-Type, expiring with the slot; S3 itself refuses anything else.
- Azure Blob: a SAS URL on the one blob name, create/write only, expiring with the slot
  (a SAS cannot pin a size: the job's creation checks it).
- Local disk (the embedded stack): a signed, expiring PUT URL served by this app
  (``receive_content``); the signature names the slot, tenant, size and content type.
Whatever the backend enforces, the job's creation checks the stored object again
(``apps.jobs.direct_uploads.submit_uploaded``).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.core.files import File
from django.core.files.storage import default_storage
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods
from rest_framework import status
from storages.utils import clean_name

from apps.api.errors import refusals
from apps.jobs.documents import InputError
from apps.jobs.models import DirectUpload
from ocrsite.vocabulary import ErrorCode

S3_BACKEND = "storages.backends.s3.S3Storage"
AZURE_BACKEND = "storages.backends.azure_storage.AzureStorage"
_TOKEN_SALT = "ocr.direct-upload"
_CHUNK = 1 << 20


class LimitedUploadHandler(FileUploadHandler):
    """First in the handler chain: counts bytes and stops the upload past OCR_MAX_UPLOAD_BYTES.

    The view sees ``request.upload_too_large`` and answers 413 with ``input:too-large``.
    """

    def __init__(self, request=None) -> None:
        super().__init__(request)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.received += len(raw_data)
        if self.received > settings.OCR_MAX_UPLOAD_BYTES:
            if self.request is not None:
                self.request.upload_too_large = True
            raise StopUpload(connection_reset=True)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


@dataclass(frozen=True)
class Presigned:
    """How the client sends the bytes: ``method`` to ``url`` with these form ``fields`` (POST,
    the file as the last part named ``file``) or these ``headers`` (PUT, the bytes as the body)."""

    method: str
    url: str
    fields: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


def presign(slot: DirectUpload, request: HttpRequest) -> Presigned:
    ttl = max(1, int((slot.expires_at - timezone.now()).total_seconds()))
    backend = settings.STORAGES["default"]["BACKEND"]
    if backend == S3_BACKEND:
        return _presign_s3(slot, ttl)
    if backend == AZURE_BACKEND:
        return _presign_azure(slot, ttl)
    token = signing.dumps(_claims(slot), salt=_TOKEN_SALT)
    url = request.build_absolute_uri(reverse("upload-content", args=[slot.pk]))
    return Presigned("PUT", f"{url}?token={token}", headers={"Content-Type": slot.content_type})


def _presign_s3(slot: DirectUpload, ttl: int) -> Presigned:
    # The storage's own client and key naming (its location prefix), so the worker finds the object.
    key = default_storage._normalize_name(clean_name(slot.key))
    post = default_storage.connection.meta.client.generate_presigned_post(
        default_storage.bucket_name,
        key,
        Fields={"Content-Type": slot.content_type},
        Conditions=[{"Content-Type": slot.content_type}, ["content-length-range", slot.size_bytes, slot.size_bytes]],
        ExpiresIn=ttl,
    )
    return Presigned("POST", post["url"], fields=post["fields"])


def _presign_azure(slot: DirectUpload, ttl: int) -> Presigned:
    # django-storages signs a blob SAS for the one name; "cw": create and write, nothing else.
    url = default_storage.url(slot.key, expire=ttl, mode="cw")
    return Presigned("PUT", url, headers={"x-ms-blob-type": "BlockBlob", "Content-Type": slot.content_type})


def _claims(slot: DirectUpload) -> dict:
    return {"id": str(slot.pk), "tenant": slot.tenant, "size": slot.size_bytes, "type": slot.content_type}


@csrf_exempt
@require_http_methods(["PUT"])
@refusals
def receive_content(request: HttpRequest, upload_id) -> HttpResponse:
    """The local-disk stand-in for a bucket's presigned URL: the signed token is the credential.

    The body streams to a temp file and is counted: more bytes than the slot declared are refused
    before they are stored; a token for another slot, tenant, size or type, or past its expiry,
    is refused with ``upload:bad-token`` / ``upload:expired``. One upload per slot.
    """
    try:
        claims = signing.loads(request.GET.get("token", ""), salt=_TOKEN_SALT, max_age=settings.OCR_UPLOAD_URL_SECONDS)
    except signing.SignatureExpired:
        raise InputError(ErrorCode.UPLOAD_EXPIRED, "the upload URL has expired") from None
    except signing.BadSignature:
        raise InputError(ErrorCode.UPLOAD_BAD_TOKEN, "the upload URL's signature is not valid") from None
    slot = DirectUpload.objects.filter(pk=upload_id).first()
    if slot is None or claims != _claims(slot):
        raise InputError(ErrorCode.UPLOAD_BAD_TOKEN, "the upload URL is not for this upload")
    if slot.expires_at < timezone.now():
        raise InputError(ErrorCode.UPLOAD_EXPIRED, "the upload URL has expired")
    if request.content_type != slot.content_type:
        raise InputError(ErrorCode.INPUT_TYPE_MISMATCH, f"the upload was declared as {slot.content_type}")
    if slot.job_id or default_storage.exists(slot.key):
        raise InputError(ErrorCode.UPLOAD_ALREADY_SENT, "this upload has already been sent")
    declared = int(request.META.get("CONTENT_LENGTH") or 0)
    if declared > slot.size_bytes:
        raise InputError(ErrorCode.INPUT_TOO_LARGE, f"{slot.size_bytes} bytes were declared for this upload")
    with tempfile.NamedTemporaryFile(prefix="ocr-upload-", dir=_spool_dir()) as spool:
        received = 0
        for chunk in iter(lambda: request.read(_CHUNK), b""):
            received += len(chunk)
            if received > slot.size_bytes:
                raise InputError(ErrorCode.INPUT_TOO_LARGE, f"{slot.size_bytes} bytes were declared for this upload")
            spool.write(chunk)
        if received != slot.size_bytes:
            raise InputError(
                ErrorCode.UPLOAD_SIZE_MISMATCH, f"{received} bytes arrived; {slot.size_bytes} were declared"
            )
        spool.flush()
        if not _store_once(slot, spool):
            raise InputError(ErrorCode.UPLOAD_ALREADY_SENT, "this upload has already been sent")
    return HttpResponse(status=status.HTTP_204_NO_CONTENT)


def _spool_dir() -> str | None:
    """The spool sits beside the slot's object where storage is a local directory, so that
    publishing it is a hard link on one file system."""
    try:
        folder = Path(default_storage.path("uploads/x")).parent
    except NotImplementedError:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


def _store_once(slot: DirectUpload, spool) -> bool:
    """The slot's one object, written by exactly one of any number of concurrent PUTs.

    The existence check above is only a shortcut: six PUTs arriving together all pass it while
    their bodies stream in, and Django's storage then saved each under a fresh name (six objects
    for one slot). On local disk the complete spool is published with ``os.link``, which fails
    if the name exists: a conditional write. Any other storage takes a claim in the shared cache
    (``cache.add``, one atomic SET NX) before writing.
    """
    try:
        path = default_storage.path(slot.key)
    except NotImplementedError:
        path = None
    if path is not None:
        try:
            os.link(spool.name, path)
        except FileExistsError:
            return False
        return True
    ttl = max(1, int((slot.expires_at - timezone.now()).total_seconds()) + 60)
    if not cache.add(f"upload-sent:{slot.pk}", 1, timeout=ttl):
        return False
    spool.seek(0)
    default_storage.save(slot.key, File(spool, name=slot.key))
    return True
