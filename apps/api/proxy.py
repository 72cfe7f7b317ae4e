"""What the trusted proxy in front says about the client, in the form that proxy sends.

APIM (AKS) and most proxies send ``X-Forwarded-Proto`` / ``X-Forwarded-For``, which Django's
SECURE_PROXY_SSL_HEADER and ``apps.api.auth.client_ip`` read. API Gateway HTTP APIs (EKS) reserve
the X-Forwarded-* names (a request-parameter mapping of them is ignored) and send RFC 7239
``Forwarded: by=…;for=…;host=…;proto=https`` instead. With DJANGO_PROXY_HEADERS=forwarded this
middleware, first in the chain, rewrites the request's X-Forwarded-Proto and -For from the
``Forwarded`` elements the trusted hops appended, and drops any X-Forwarded-* the client sent;
with the default (x-forwarded) it does nothing, and a client's own ``Forwarded`` is never read.
Without it, DJANGO_SECURE redirects every API call behind API Gateway and every client shares the
gateway's address for login throttling.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


def parse_forwarded(header: str) -> list[dict[str, str]]:
    """RFC 7239 elements, in order (the last appended by the nearest proxy); keys lower-cased,
    quoted values unquoted. A malformed pair is skipped, not fatal."""
    elements = []
    for element in header.split(","):
        pairs: dict[str, str] = {}
        for pair in element.split(";"):
            key, sep, value = pair.strip().partition("=")
            if sep and key:
                pairs[key.strip().lower()] = value.strip().strip('"')
        elements.append(pairs)
    return elements


def _address(node: str) -> str:
    """A ``for=`` node without its port: 192.0.2.60:4711 -> 192.0.2.60, [2001:db8::1]:80 -> 2001:db8::1."""
    if node.startswith("["):
        return node[1 : node.find("]")] if "]" in node else node
    return node.rsplit(":", 1)[0] if node.count(":") == 1 else node


class ForwardedMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        hops = settings.DJANGO_TRUSTED_PROXY_COUNT
        if hops > 0 and settings.DJANGO_PROXY_HEADERS == "forwarded":
            meta = request.META
            meta.pop("HTTP_X_FORWARDED_PROTO", None)
            meta.pop("HTTP_X_FORWARDED_FOR", None)
            elements = parse_forwarded(meta.get("HTTP_FORWARDED", ""))
            elements = [e for e in elements if e]
            if len(elements) >= hops:
                # The outermost trusted hop ended TLS and saw the client: its element is the
                # hops-th from the right; anything left of it the client could have written.
                edge = elements[-hops]
                if proto := edge.get("proto"):
                    meta["HTTP_X_FORWARDED_PROTO"] = proto.lower()
                fors = [_address(e["for"]) for e in elements if e.get("for")]
                if fors:
                    meta["HTTP_X_FORWARDED_FOR"] = ", ".join(fors)
        return self.get_response(request)
