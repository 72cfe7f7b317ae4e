"""Credentials for perimeter tests: real API keys in the database, and a real OIDC issuer.

The issuer is a generated RSA key whose public half is served as a JWKS over HTTP on 127.0.0.1
by a small ``http.server`` thread, so the API fetches and caches it exactly as it would from an
identity provider. Tokens are signed here with PyJWT; hostile ones are assembled by hand.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from celery import current_app
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from rest_framework.test import APIClient

from apps.api.models import TenantAPIKey
from tests.support.queues import QUEUES, Broker

AUDIENCE = "ocr-api"


def new_key(tenant: str, **fields: Any) -> tuple[TenantAPIKey, str]:
    """A key as the admin creates it: the model stores the hash, the caller gets the secret once."""
    return TenantAPIKey.objects.create_key(name=f"test {tenant}", tenant=tenant, **fields)


def key_client(raw: str, header: str = "x-api-key") -> APIClient:
    client = APIClient()
    if header == "authorization":
        client.credentials(HTTP_AUTHORIZATION=f"Api-Key {raw}")
    else:
        client.credentials(HTTP_X_API_KEY=raw)
    return client


def bearer_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Issuer:
    """An OIDC issuer: a signing key, its JWKS served on 127.0.0.1, and token minting."""

    def __init__(self) -> None:
        self.private_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = uuid.uuid4().hex[:12]
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private_key.public_key()))
        self.jwks = {"keys": [{**jwk, "kid": self.kid, "alg": "RS256", "use": "sig"}]}
        self.public_pem = self.private_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.fetches = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.fetches += 1
                body = json.dumps(issuer.jwks).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        host, port = self.server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self.jwks_url = f"{self.url}/.well-known/jwks.json"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def settings(self) -> dict[str, Any]:
        return {
            "OIDC_ISSUER": self.url,
            "OIDC_AUDIENCE": AUDIENCE,
            "OIDC_JWKS_URL": self.jwks_url,
            "OIDC_JWKS_FILE": "",
            "OIDC_TENANT_CLAIM": "tenant",
        }

    def claims(self, tenant: str, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        return {
            "iss": self.url,
            "aud": AUDIENCE,
            "sub": f"client-{tenant}",
            "tenant": tenant,
            "iat": now,
            "exp": now + 600,
            **overrides,
        }

    def token(self, tenant: str, **overrides: Any) -> str:
        return jwt.encode(
            self.claims(tenant, **overrides), self.private_key, algorithm="RS256", headers={"kid": self.kid}
        )

    def unsigned_token(self, tenant: str) -> str:
        """``alg: none``: a token with no signature at all."""
        header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": self.kid}).encode())
        return f"{header}.{_b64(json.dumps(self.claims(tenant)).encode())}."

    def hs256_confused_token(self, tenant: str) -> str:
        """HS256 "signed" with the issuer's public key as the HMAC secret (the classic confusion)."""
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": self.kid}).encode())
        signing_input = f"{header}.{_b64(json.dumps(self.claims(tenant)).encode())}"
        signature = hmac.new(self.public_pem, signing_input.encode(), hashlib.sha256).digest()
        return f"{signing_input}.{_b64(signature)}"


@contextmanager
def queues_held(redis_client) -> Iterator[None]:
    """Running workers, if any, take nothing while a test that only submits runs.

    Without this, a worker left running by an earlier test would process these jobs during the
    test, and a stage still in its transaction when the test's database flush truncates the
    tables can deadlock with it. What the test sent is dropped before the workers take their
    queues back (its job rows are about to be truncated), and they are given back only once no
    task is running or reserved, so nothing of this test runs during the flush: giving the queues
    back with the messages still in them started ingests in the middle of the flush (a deadlock
    in CI). (tests.support.queues.Broker.paused insists on a running worker; these tests run without one.)
    """
    control = current_app.control
    replies = control.inspect(timeout=2).active_queues() or {}
    taken = [(name, q["name"]) for name, queues in replies.items() for q in queues if q["name"] in QUEUES]
    for name, queue in taken:
        control.cancel_consumer(queue, destination=[name], reply=True, timeout=5)
    try:
        yield
    finally:
        redis_client.delete(*QUEUES)
        workers = sorted({name for name, _ in taken})
        if workers:
            _wait_until_idle(control, workers)
        for name, queue in taken:
            control.add_consumer(queue, destination=[name], reply=True, timeout=5)


def _wait_until_idle(control, workers: list[str], timeout: float = 60) -> None:
    """Until none of ``workers`` runs or holds a task (one prefetched before its consumer was
    cancelled still runs). Bounded: a stuck worker shows up in the tests that use it. It asks the
    workers rather than Broker.wait_idle's Redis bookkeeping: an unacked entry left by a worker an
    earlier test killed would hold that wait until its visibility timeout, and fail a teardown."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        inspect = control.inspect(destination=workers, timeout=2)
        busy = [
            t for replies in (inspect.active() or {}, inspect.reserved() or {}) for ts in replies.values() for t in ts
        ]
        if not busy:
            return
        time.sleep(0.5)


def settle(redis_client, timeout: float = 180) -> None:
    """Wait until the workers have finished everything sent (for tests that use the worker)."""
    Broker(current_app, redis_client).wait_idle(timeout=timeout)
