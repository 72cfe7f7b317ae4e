"""How big a tenant's documents may be: the one place that answers it.

Defaults come from settings (OCR_MAX_DOCUMENT_BYTES, OCR_MAX_PAGES); a tenant's own row, once
there is one, overrides them here and nowhere else.
"""

from __future__ import annotations

from django.conf import settings

from apps.jobs.services import Limits


def limits_for(tenant: str) -> Limits:
    """The limits for documents sent straight to storage (``POST /api/v1/uploads``)."""
    return Limits(max_bytes=settings.OCR_MAX_DOCUMENT_BYTES, max_pages=settings.OCR_MAX_PAGES)


def inline_limits_for(tenant: str) -> Limits:
    """Through the web tier (multipart) a document is also held to OCR_MAX_UPLOAD_BYTES."""
    direct = limits_for(tenant)
    return Limits(max_bytes=min(direct.max_bytes, settings.OCR_MAX_UPLOAD_BYTES), max_pages=direct.max_pages)
