"""Mint an API key from the shell (bootstrap, scripts); the admin does the same by hand."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from apps.api.models import TenantAPIKey


class Command(BaseCommand):
    help = "Create an API key for TENANT and print it once (only its hash is stored)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("tenant")
        parser.add_argument("--name", default="", help="a label for operators (default: the tenant)")

    def handle(self, *args, tenant: str, name: str, **options) -> None:
        key, raw = TenantAPIKey.objects.create_key(name=name or tenant, tenant=tenant)
        self.stderr.write(f"API key {key.prefix}… for tenant {tenant!r}; store it now, it is not shown again")
        self.stdout.write(raw)
