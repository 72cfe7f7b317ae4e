"""Per-client API keys. The secret is shown once at creation and stored hashed; the prefix stays
visible so an operator can tell keys apart and revoke one without seeing any secret."""

from __future__ import annotations

from django.db import models
from rest_framework_api_key.models import AbstractAPIKey


class TenantAPIKey(AbstractAPIKey):
    """An integrator's key. Every job it submits belongs to ``tenant``, and it sees only those."""

    tenant = models.CharField(
        max_length=100,
        db_index=True,
        help_text="The tenant this key acts for; jobs, throttles and quotas are counted per tenant.",
    )

    webhook_url = models.URLField(
        max_length=2000,
        blank=True,
        default="",
        help_text="Default callback for jobs this key submits (a request's callback_url overrides it).",
    )

    class Meta(AbstractAPIKey.Meta):
        verbose_name = "API key"
        verbose_name_plural = "API keys"
