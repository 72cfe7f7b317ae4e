"""Mint an API key from the shell (bootstrap, scripts); the admin does the same by hand."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.api.models import Tenant, TenantAPIKey, tenant_slug


class Command(BaseCommand):
    help = "Create an API key for TENANT (created if new) and print it once (only its hash is stored)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("tenant")
        parser.add_argument("--name", default="", help="a label for operators (default: the tenant)")

    def handle(self, *args, tenant: str, name: str, **options) -> None:
        # A key for "" would act for no tenant and skip every per-tenant throttle and quota.
        try:
            tenant_slug(tenant)
        except ValidationError as exc:
            raise CommandError(f"tenant {tenant!r}: {' '.join(exc.messages)}") from None
        Tenant.objects.get_or_create(slug=tenant)
        key, raw = TenantAPIKey.objects.create_key(name=name or tenant, tenant=tenant)
        self.stderr.write(f"API key {key.prefix}… for tenant {tenant!r}; store it now, it is not shown again")
        self.stdout.write(raw)
