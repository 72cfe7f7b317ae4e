"""How big a tenant's documents may be: the one place that answers it.

A tenant's own row (``Tenant.max_upload_bytes``, ``Tenant.max_pages``) overrides the platform's
defaults (OCR_MAX_DOCUMENT_BYTES, OCR_MAX_PAGES); an empty override, or no row, follows them.
"""

from __future__ import annotations

from django.conf import settings

from apps.api.models import Tenant
from apps.jobs.services import Limits


def limits_for(tenant: str) -> Limits:
    """The limits for documents sent straight to storage (``POST /api/v1/uploads``)."""
    row = Tenant.objects.filter(slug=tenant).values("max_upload_bytes", "max_pages").first() or {}
    return Limits(
        max_bytes=row.get("max_upload_bytes") or settings.OCR_MAX_DOCUMENT_BYTES,
        max_pages=row.get("max_pages") or settings.OCR_MAX_PAGES,
    )


def inline_limits_for(tenant: str) -> Limits:
    """Through the web tier (multipart) a document is also held to OCR_MAX_UPLOAD_BYTES."""
    direct = limits_for(tenant)
    return Limits(max_bytes=min(direct.max_bytes, settings.OCR_MAX_UPLOAD_BYTES), max_pages=direct.max_pages)
