"""/metrics: django-prometheus's exporter behind our access rule."""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django_prometheus.exports import ExportToDjangoView

from apps.api.errors import ApiError, refusals
from ocrsite.vocabulary import ErrorCode


@refusals
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format. With METRICS_TOKEN set, a bearer token is required; without one,
    only loopback clients are answered, so the endpoint is never public by accident."""
    token = settings.METRICS_TOKEN
    if token:
        header = request.headers.get("Authorization", "")
        given = header[7:] if header.startswith("Bearer ") else ""
        if not hmac.compare_digest(given.encode(), token.encode()):
            raise ApiError(
                ErrorCode.AUTH_NOT_AUTHENTICATED,
                "metrics need a bearer token",
                headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
            )
    elif not _is_loopback(request.META.get("REMOTE_ADDR", "")):
        raise ApiError(ErrorCode.AUTH_FORBIDDEN, "metrics answer loopback clients only; set METRICS_TOKEN")
    return ExportToDjangoView(request)


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False
