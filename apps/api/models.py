"""Tenants, the people who act for them, and their API keys.

A tenant is explicit: a ``Tenant`` row names it (``slug``, the value jobs carry in ``Job.tenant``),
an API key names it, an OIDC token's claim names it, and a Django user reaches the API only
through a ``TenantUser`` link an operator made on purpose — never because a username happens to
match. A key's secret is shown once at creation and stored hashed; the prefix stays visible so
an operator can tell keys apart and revoke one without seeing any secret.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from rest_framework_api_key.models import AbstractAPIKey

# Printable, no spaces or slashes: tenant ids travel in logs, cache keys and admin filters.
tenant_slug = RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,99}$", "1-100 letters, digits or ._@:+-")


class Tenant(models.Model):
    """A customer of the platform. Limits left empty follow the platform-wide settings."""

    slug = models.CharField(
        max_length=100,
        unique=True,
        validators=[tenant_slug],
        help_text="The tenant id: what API keys and OIDC claims name, and what jobs carry.",
    )
    name = models.CharField(max_length=200, blank=True, default="")
    created = models.DateTimeField(auto_now_add=True)

    max_upload_bytes = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Largest upload for this tenant (empty: OCR_MAX_UPLOAD_BYTES)."
    )
    max_pages = models.PositiveIntegerField(
        null=True, blank=True, help_text="Most pages per document for this tenant (empty: OCR_MAX_PAGES)."
    )
    backlog_share = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Fraction of OCR_BACKPRESSURE_PAGES this tenant's waiting pages may fill (empty: OCR_BACKLOG_SHARE).",
    )
    webhook_allow_nets = models.TextField(
        blank=True,
        default="",
        help_text="Private networks (CIDR, comma-separated) this tenant's callbacks may reach, "
        "on top of OCR_WEBHOOK_ALLOW_NETS.",
    )
    batch_prefixes = models.TextField(
        blank=True,
        default="",
        help_text="Key prefixes in the deployment's storage (comma-separated, e.g. archives/acme/) that this "
        "tenant's batches may read; empty: batches from storage keys are refused (upload ids still work).",
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class TenantUser(models.Model):
    """A Django user allowed to call the API, and the one tenant it acts for."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tenant")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="users")

    class Meta:
        verbose_name = "API user"
        verbose_name_plural = "API users"

    def __str__(self) -> str:
        return f"{self.user} → {self.tenant}"


class TenantAPIKey(AbstractAPIKey):
    """An integrator's key. Every job it submits belongs to ``tenant``, and it sees only those."""

    tenant = models.CharField(
        max_length=100,
        db_index=True,
        validators=[tenant_slug],
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
        constraints = [
            # A key without a tenant would act for nobody and skip every per-tenant throttle.
            models.CheckConstraint(condition=~models.Q(tenant=""), name="api_key_names_a_tenant"),
        ]

    def clean(self) -> None:
        super().clean()
        if self.tenant and not Tenant.objects.filter(slug=self.tenant).exists():
            raise ValidationError({"tenant": f"no tenant {self.tenant!r}: create it first"})


def batch_prefixes(tenant: str) -> list[str]:
    """The storage key prefixes the tenant's batches may read (none: no prefix or key batches)."""
    raw = Tenant.objects.filter(slug=tenant).values_list("batch_prefixes", flat=True).first() or ""
    return [p.strip() for p in raw.split(",") if p.strip()]


def webhook_allow_nets(tenant: str) -> list[str]:
    """The tenant's own webhook networks (installed into apps.webhooks.egress at startup)."""
    nets = Tenant.objects.filter(slug=tenant).values_list("webhook_allow_nets", flat=True).first() or ""
    return [net.strip() for net in nets.split(",") if net.strip()]
