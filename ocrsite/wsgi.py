from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

from ocrsite import telemetry

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ocrsite.settings")
# Before the application loads: the Django instrumentation adds its middleware (off unless OTEL_*
# names an OTLP endpoint).
telemetry.configure("web")
application = get_wsgi_application()
