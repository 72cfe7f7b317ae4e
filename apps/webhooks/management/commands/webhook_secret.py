from __future__ import annotations

from django.core.management.base import BaseCommand

from apps.webhooks import services


class Command(BaseCommand):
    help = "Print a tenant's webhook signing secrets (newest first); --rotate makes a new one first."

    def add_arguments(self, parser) -> None:
        parser.add_argument("tenant")
        parser.add_argument("--rotate", action="store_true", help="old secrets keep signing for the overlap")

    def handle(self, tenant: str, rotate: bool, **options) -> None:
        if rotate:
            services.rotate_secret(tenant)
        for secret in services.signing_secrets(tenant):
            self.stdout.write(secret)
