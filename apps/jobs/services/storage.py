"""Payload bytes in Django's default storage (local files, S3, Azure Blob): never on the broker."""

from __future__ import annotations

import logging

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

log = logging.getLogger(__name__)


def save_bytes(name: str, data: bytes) -> str:
    """Write to default storage under exactly ``name`` (overwriting), returning the stored name."""
    if default_storage.exists(name):
        default_storage.delete(name)
    return default_storage.save(name, ContentFile(data))


def delete_stored(names: list[str], job_id) -> None:
    for name in names:
        try:
            default_storage.delete(name)
        except Exception:  # storage backends raise their own types (botocore, azure, OSError)
            log.exception("purge could not delete a stored file", extra={"job_id": str(job_id), "file": name})
