"""RFC 7239 Forwarded from the trusted proxy (API Gateway HTTP APIs on EKS send nothing else):
the scheme it saw decides Django's HTTPS redirect, and its ``for=`` the client's address; what a
client writes itself is not believed. Django's own SecurityMiddleware does the redirect here."""

from __future__ import annotations

import pytest
from django.http import HttpResponse
from django.middleware.security import SecurityMiddleware
from django.test import RequestFactory, override_settings

from apps.api.auth import client_ip
from apps.api.proxy import ForwardedMiddleware, parse_forwarded

BEHIND_API_GATEWAY = {
    "DJANGO_TRUSTED_PROXY_COUNT": 1,
    "DJANGO_PROXY_HEADERS": "forwarded",
    "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
    "SECURE_SSL_REDIRECT": True,
    "SECURE_REDIRECT_EXEMPT": [],
    "ALLOWED_HOSTS": ["ocr.example.internal"],
}


def serve(**headers):
    seen = {}

    def view(request):
        seen["ip"] = client_ip(request)
        seen["secure"] = request.is_secure()
        return HttpResponse("ok")

    request = RequestFactory().get(
        "/api/v1/jobs", HTTP_HOST="ocr.example.internal", REMOTE_ADDR="10.40.240.9", **headers
    )
    response = ForwardedMiddleware(SecurityMiddleware(view))(request)
    return response, seen


@override_settings(**BEHIND_API_GATEWAY)
def test_forwarded_https_from_the_gateway_is_not_redirected_and_names_the_client():
    response, seen = serve(HTTP_FORWARDED="by=10.40.240.9;for=203.0.113.7;host=ocr.example.internal;proto=https")
    assert response.status_code == 200 and seen == {"ip": "203.0.113.7", "secure": True}


@override_settings(**BEHIND_API_GATEWAY)
def test_a_clients_own_x_forwarded_headers_are_not_believed():
    response, _ = serve(
        HTTP_X_FORWARDED_PROTO="https",
        HTTP_X_FORWARDED_FOR="198.51.100.1",
        HTTP_FORWARDED="for=203.0.113.7;proto=http",
    )
    assert response.status_code == 301


@override_settings(**BEHIND_API_GATEWAY)
def test_only_the_trusted_hops_element_counts():
    # The client sent its own Forwarded claiming another address; the gateway appended the real one.
    _, seen = serve(HTTP_FORWARDED='for=198.51.100.1;proto=https, for="[2001:db8::7]:4711";proto=https')
    assert seen["ip"] == "2001:db8::7" and seen["secure"]


@override_settings(**{**BEHIND_API_GATEWAY, "DJANGO_PROXY_HEADERS": "x-forwarded"})
def test_behind_an_x_forwarded_proxy_a_forwarded_header_is_ignored():
    response, _ = serve(HTTP_FORWARDED="for=203.0.113.7;proto=https")
    assert response.status_code == 301
    response, seen = serve(HTTP_X_FORWARDED_PROTO="https", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert response.status_code == 200 and seen["ip"] == "203.0.113.7"


@pytest.mark.parametrize(
    "header, expected",
    [
        ("for=192.0.2.43", [{"for": "192.0.2.43"}]),
        ('For="[2001:db8:cafe::17]:4711";Proto=HTTPS', [{"for": "[2001:db8:cafe::17]:4711", "proto": "HTTPS"}]),
        (
            "for=192.0.2.43, for=198.51.100.17;by=203.0.113.60",
            [{"for": "192.0.2.43"}, {"for": "198.51.100.17", "by": "203.0.113.60"}],
        ),
        ("garbage;;=x", [{}]),
    ],
)
def test_parse_forwarded(header, expected):
    assert parse_forwarded(header) == expected
