"""/metrics: django-prometheus's exporter behind our access rule."""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django_prometheus.exports import ExportToDjangoView


def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format. With METRICS_TOKEN set, a bearer token is required; without one,
    only loopback clients are answered, so the endpoint is never public by accident."""
    token = settings.METRICS_TOKEN
    if token:
        header = request.headers.get("Authorization", "")
        given = header[7:] if header.startswith("Bearer ") else ""
        if not hmac.compare_digest(given.encode(), token.encode()):
            response = HttpResponse("metrics need a bearer token\n", status=401, content_type="text/plain")
            response["WWW-Authenticate"] = 'Bearer realm="metrics"'
            return response
    elif not _is_loopback(request.META.get("REMOTE_ADDR", "")):
        return HttpResponse(
            "metrics answer loopback clients only; set METRICS_TOKEN\n", status=403, content_type="text/plain"
        )
    return ExportToDjangoView(request)


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False
