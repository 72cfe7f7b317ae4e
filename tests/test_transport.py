"""Production transport: security headers, CORS closed by default, HTTPS behind a TLS proxy,
secrets only from the environment or *_FILE, and admin login throttling (django-axes on Redis).

Settings that are decided at import (DJANGO_SECURE, the proxy header, the secret key) are checked
in a fresh Python process with the environment a deployment would set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory

from apps.api.auth import client_ip
from tests.support.documents import ROOT


@pytest.mark.django_db(transaction=True)
def test_security_headers_on_api_responses(api):
    resp = api.get("/api/v1/jobs")
    assert resp.status_code == 200
    assert resp["X-Content-Type-Options"] == "nosniff"
    assert resp["X-Frame-Options"] == "DENY"
    assert resp["Referrer-Policy"] == "same-origin"
    assert resp["Cross-Origin-Opener-Policy"] == "same-origin"


@pytest.mark.django_db(transaction=True)
def test_cors_is_closed_unless_an_origin_is_listed(api, settings):
    preflight = {
        "HTTP_ORIGIN": "https://evil.example",
        "HTTP_ACCESS_CONTROL_REQUEST_METHOD": "POST",
        "HTTP_ACCESS_CONTROL_REQUEST_HEADERS": "x-api-key",
    }
    resp = api.options("/api/v1/jobs", **preflight)
    assert "Access-Control-Allow-Origin" not in resp
    assert "Access-Control-Allow-Origin" not in api.get("/api/v1/jobs", HTTP_ORIGIN="https://evil.example")

    settings.CORS_ALLOWED_ORIGINS = ["https://app.example"]
    resp = api.options("/api/v1/jobs", **{**preflight, "HTTP_ORIGIN": "https://app.example"})
    assert resp["Access-Control-Allow-Origin"] == "https://app.example"
    assert "x-api-key" in resp["Access-Control-Allow-Headers"]
    assert "Access-Control-Allow-Origin" not in api.options("/api/v1/jobs", **preflight)


def _settings_in_fresh_process(env: dict[str, str], code: str) -> subprocess.CompletedProcess:
    script = textwrap.dedent(
        """
        import json, os
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ocrsite.settings")
        import django
        django.setup()
        from django.conf import settings
        from django.test import Client
        """
    ) + textwrap.dedent(code)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "OIDC_"))}
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=120
    )


def test_secure_mode_behind_a_tls_proxy(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text(f"  s3cret-{uuid.uuid4().hex}\n")
    proc = _settings_in_fresh_process(
        {
            "DJANGO_SECURE": "true",
            "DJANGO_SECRET_KEY_FILE": str(secret),
            "DJANGO_TRUSTED_PROXY_COUNT": "1",
            "DJANGO_CSRF_TRUSTED_ORIGINS": "https://ocr.example.com",
        },
        """
        c = Client()
        plain = c.get("/api/v1/jobs")
        probe = c.get("/healthz")
        proxied = c.get("/api/v1/jobs", HTTP_X_FORWARDED_PROTO="https")
        print(json.dumps({
            "secret": settings.SECRET_KEY, "hsts": settings.SECURE_HSTS_SECONDS,
            "proxy": list(settings.SECURE_PROXY_SSL_HEADER), "cookies": [settings.SESSION_COOKIE_SECURE,
            settings.CSRF_COOKIE_SECURE], "csrf": settings.CSRF_TRUSTED_ORIGINS,
            "plain": [plain.status_code, plain.get("Location", "")], "probe": probe.status_code,
            "proxied": [proxied.status_code, proxied.get("Strict-Transport-Security", "")],
        }))
        """,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["secret"] == secret.read_text().strip()  # from the file, trimmed
    assert got["hsts"] >= 31_536_000 and got["cookies"] == [True, True]
    assert got["proxy"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert got["csrf"] == ["https://ocr.example.com"]
    assert got["plain"][0] == 301 and got["plain"][1].startswith("https://")  # plain HTTP is redirected
    assert got["probe"] == 200  # kubelet probes speak plain HTTP to the pod
    assert got["proxied"][0] == 401  # over TLS (said by the proxy): answered, and credentials needed
    assert "max-age=31536000" in got["proxied"][1]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DJANGO_SECURE": "true"}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_SECRET_KEY_FILE": "/nonexistent/secret"}, "cannot be read"),
        ({"OIDC_ALGORITHMS": "RS256,HS256"}, "public-key algorithms only"),
        ({"OIDC_ALGORITHMS": "none"}, "public-key algorithms only"),
        ({"OCR_RATE_SUBMISSIONS": "lots"}, "OCR_RATE_SUBMISSIONS"),
    ],
    ids=["secure-without-secret", "unreadable-secret-file", "hmac-allowed", "alg-none", "bad-rate"],
)
def test_unsafe_configuration_refuses_to_start(env, message):
    proc = _settings_in_fresh_process(env, "print('started')")
    assert proc.returncode != 0 and "started" not in proc.stdout
    assert message in proc.stderr


@pytest.mark.django_db(transaction=True)
def test_admin_login_is_locked_after_repeated_failures(settings):
    name = f"op-{uuid.uuid4().hex[:8]}"
    get_user_model().objects.create_user(username=name, password="right-password", is_staff=True)
    browser = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        resp = browser.post("/admin/login/", {"username": name, "password": "wrong"})
        assert resp.status_code == 200  # the form again, with an error
    # The failure that reaches the limit is answered with the lockout itself.
    assert browser.post("/admin/login/", {"username": name, "password": "wrong"}).status_code == 429
    locked = browser.post("/admin/login/", {"username": name, "password": "right-password"})
    assert locked.status_code == 429, locked.status_code  # even the right password, for the cool-off
    assert "_auth_user_id" not in browser.session
    # The lock is for that name from that address: the operator at another address still gets in.
    elsewhere = Client(REMOTE_ADDR="198.51.100.2")
    resp = elsewhere.post("/admin/login/", {"username": name, "password": "right-password"})
    assert resp.status_code == 302 and elsewhere.session.get("_auth_user_id")
    # Tests that log in without a request (Client.login) are not HTTP attempts and still work.
    assert Client().login(username=name, password="right-password")


def test_client_ip_behind_trusted_proxies(settings):
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.5", HTTP_X_FORWARDED_FOR="1.2.3.4, 203.0.113.9")
    settings.DJANGO_TRUSTED_PROXY_COUNT = 0
    assert client_ip(request) == "10.0.0.5"  # no proxy trusted: the header may be forged
    settings.DJANGO_TRUSTED_PROXY_COUNT = 1
    assert client_ip(request) == "203.0.113.9"  # what our one proxy saw; "1.2.3.4" is the client's claim
