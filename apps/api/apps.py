from __future__ import annotations

from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "apps.api"
    label = "api"

    def ready(self) -> None:
        from django.conf import settings
        from PIL import Image

        # Pillow's own decompression-bomb guard, set from our limit in every process that loads
        # Django (web, workers, the CLI): Image.open refuses past twice this many pixels even on
        # a path that forgot the explicit check in apps/jobs/documents.py (probe).
        Image.MAX_IMAGE_PIXELS = settings.OCR_MAX_IMAGE_PIXELS

        from apps.api.models import webhook_allow_nets
        from apps.webhooks import egress

        egress.tenant_allow_nets = webhook_allow_nets

        from apps.api.throttles import parse_rate
        from ocrsite.env import ConfigError

        for name in ("OCR_RATE_SUBMISSIONS", "OCR_RATE_POLLS"):
            try:
                parse_rate(getattr(settings, name))
            except ValueError as exc:  # fail at startup, not at the first request
                raise ConfigError(f"{name}: {exc}") from exc
