"""Identity and tenancy on every endpoint: API keys, OIDC bearer tokens, Django tokens.

Real parts throughout: keys in PostgreSQL, a JWKS fetched over HTTP from a local issuer, jobs run
by the real worker process so that the result endpoint has something to serve.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Callable
from datetime import timedelta

import jwt
import pytest
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse
from django.utils import timezone
from rest_framework.test import APIClient

from apps.api.models import Tenant
from apps.jobs.models import Batch, DirectUpload, Job
from tests.hostile.corpus import text_pdf
from tests.support.jobs_api import upload, wait_for_job
from tests.support.perimeter import Issuer, bearer_client, key_client, new_key, settle


@pytest.fixture(scope="module")
def issuer():
    iss = Issuer()
    yield iss
    iss.close()


@pytest.fixture
def oidc(issuer, settings) -> Issuer:
    for name, value in issuer.settings().items():
        setattr(settings, name, value)
    return issuer


@pytest.fixture
def settled(worker, redis_client, transactional_db):
    """The worker, left idle after the test: nothing may still run when the database is flushed."""
    yield worker
    settle(redis_client)


def _pdf(name: str = "doc.pdf") -> io.BytesIO:
    fh = io.BytesIO(text_pdf())
    fh.name = name
    return fh


# Routes that take no API credential, each with why. Every other route (but the admin's, behind its
# own login) must be in ENDPOINTS: test_every_route_is_in_endpoints_or_public_by_name.
PUBLIC = {
    "healthz": "liveness probe",
    "readyz": "readiness probe",
    "gateway-health": "the course gateway's liveness probe",
    "upload-content": "the local-disk stand-in for a presigned URL: its signed token is the credential",
    "metrics": "its own bearer token (METRICS_TOKEN), else loopback clients only",
}

# (label, method, path template, body factory, status with valid credentials)
ENDPOINTS: list[tuple[str, str, str, Callable[[], dict] | None, int]] = [
    ("submit", "post", "/api/v1/jobs", lambda: {"file": _pdf()}, 202),
    ("list", "get", "/api/v1/jobs", None, 200),
    ("status", "get", "/api/v1/jobs/{done}", None, 200),
    ("result", "get", "/api/v1/jobs/{done}/result?format=markdown", None, 200),
    ("result-json", "get", "/api/v1/jobs/{done}/result?format=json", None, 200),
    ("gateway-process", "post", "/process", lambda: {"file": _pdf()}, 202),
    ("gateway-status", "get", "/status/{done}", None, 200),
    ("schema", "get", "/api/schema/", None, 200),
    ("docs", "get", "/api/docs/", None, 200),
    ("batch-create", "post", "/api/v1/batches", lambda: {"keys": [f"{BATCH_PREFIX}missing.pdf"]}, 202),
    ("batch-list", "get", "/api/v1/batches", None, 200),
    ("batch-status", "get", "/api/v1/batches/{batch_done}", None, 200),
    ("batch-manifest", "get", "/api/v1/batches/{batch_done}/manifest", None, 200),
    ("batch-cancel", "delete", "/api/v1/batches/{batch_active}", None, 202),  # once: it ends the batch
    (
        "upload",
        "post",
        "/api/v1/uploads",
        lambda: {"filename": "big.pdf", "size": 4096, "content_type": "application/pdf"},
        201,
    ),
    ("cancel", "delete", "/api/v1/jobs/{active}", None, 202),  # last: it ends the active job
]
# Endpoints that end what they act on: the first good client's call is the one that counts.
ONCE = ("cancel", "batch-cancel")
BATCH_PREFIX = "batches/auth/"


def _routes(patterns=None):
    """Every routed view but the admin's, as (url name, view callable)."""
    for pattern in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(pattern, URLResolver):
            if pattern.app_name != "admin":
                yield from _routes(pattern.url_patterns)
        elif isinstance(pattern, URLPattern):
            yield pattern.name, pattern.callback


def _methods(view) -> set[str]:
    """The HTTP methods a DRF view answers (OPTIONS and HEAD aside); None for a plain Django view."""
    if hasattr(view, "actions"):  # a viewset's route: method -> action (DRF adds HEAD once served)
        return {m.upper() for m in view.actions} - {"OPTIONS", "HEAD"}
    if hasattr(view, "cls"):
        return {m.upper() for m in view.cls.http_method_names if hasattr(view.cls, m)} - {"OPTIONS", "HEAD"}
    return None


def test_every_route_is_in_endpoints_or_public_by_name():
    """The endpoint recipe's last step: a route no ENDPOINTS entry calls is never checked against
    bad credentials or other tenants. A plain Django view bypasses DRF's authentication, so it
    must be public by name, with its reason."""
    served = set()
    for name, view in _routes():
        if name in PUBLIC:
            continue
        methods = _methods(view)
        assert methods is not None, f"{name}: a plain Django view outside PUBLIC (no DRF authentication)"
        served |= {(name, method) for method in methods}
    ids = {name: uuid.uuid4() for name in ("done", "active", "batch_done", "batch_active")}
    listed = {(resolve(t.split("?")[0].format(**ids)).url_name, m.upper()) for _, m, t, _, _ in ENDPOINTS}
    assert served - listed == set(), "routes missing from ENDPOINTS (or PUBLIC)"
    assert listed - served == set(), "ENDPOINTS entries no route serves"


def test_every_api_view_is_throttled():
    """A view that names no throttle gets DEFAULT_THROTTLE_CLASSES; one that opts out fails here."""
    for name, view in _routes():
        if hasattr(view, "cls") and name not in PUBLIC:
            assert view.cls.throttle_classes, f"{name} has no throttle"


def _call(client: APIClient, method: str, path: str, body: Callable[[], dict] | None):
    if body is None:
        return getattr(client, method)(path)
    return getattr(client, method)(path, body(), format="multipart")


def _done_and_active_jobs(client: APIClient, tenant: str) -> dict[str, str]:
    resp = client.post("/api/v1/jobs", {"file": _pdf()}, format="multipart")
    assert resp.status_code == 202, resp.content
    done = resp.json()["id"]
    assert wait_for_job(client, done)["status"] == "done"
    # Active by construction, not by timing: a running job no message will ever move, so it is
    # still active when the cancel arrives however fast the workers are (a submitted scan could
    # finish first on a quick machine).
    active = Job.objects.create(
        tenant=tenant, status=Job.Status.RUNNING, filename="active.pdf", kind="pdf", sha256="0" * 64, page_count=1
    )
    # Batches as rows: no bulk worker runs here, so a created batch stays running.
    Tenant.objects.update_or_create(slug=tenant, defaults={"batch_prefixes": BATCH_PREFIX})
    batch_done = Batch.objects.create(tenant=tenant, source=Batch.Source.KEYS, status=Batch.Status.DONE, expanded=True)
    batch_active = Batch.objects.create(tenant=tenant, source=Batch.Source.KEYS)
    return {
        "done": done,
        "active": str(active.pk),
        "batch_done": str(batch_done.pk),
        "batch_active": str(batch_active.pk),
    }


@pytest.mark.django_db(transaction=True)
def test_every_endpoint_refuses_each_bad_credential_then_serves_a_good_one(settled, oidc):
    tenant = f"acme-{uuid.uuid4().hex[:6]}"
    _, raw = new_key(tenant)
    revoked, revoked_raw = new_key(tenant)
    revoked.revoked = True
    revoked.save()
    _, expired_key_raw = new_key(tenant, expiry_date=timezone.now() - timedelta(minutes=1))
    good = key_client(raw)
    ids = _done_and_active_jobs(good, tenant)

    bad: dict[str, APIClient] = {
        "none": APIClient(),
        "wrong key": key_client(raw[:-4] + "abcd"),
        "revoked key": key_client(revoked_raw, header="authorization"),
        "expired key": key_client(expired_key_raw),
        "expired JWT": bearer_client(oidc.token(tenant, exp=int(timezone.now().timestamp()) - 3600)),
        "wrong audience": bearer_client(oidc.token(tenant, aud="someone-else")),
        "wrong issuer": bearer_client(oidc.token(tenant, iss="https://evil.example")),
        "alg none": bearer_client(oidc.unsigned_token(tenant)),
        "HS256 with the public key": bearer_client(oidc.hs256_confused_token(tenant)),
        "garbage bearer": bearer_client("not-a-jwt"),
    }
    for label, method, template, body, _ in ENDPOINTS:
        path = template.format(**ids)
        for why, client in bad.items():
            resp = _call(client, method, path, body)
            assert resp.status_code == 401, (label, why, resp.status_code, resp.content[:300])
            assert resp["WWW-Authenticate"], (label, why)
            if "json" in resp.get("Content-Type", ""):
                assert resp.json()["error"]["code"] in ("auth:not-authenticated", "auth:invalid-credentials")
    # Nothing the refused requests sent was accepted.
    assert Job.objects.filter(tenant=tenant).count() == 2
    assert not DirectUpload.objects.filter(tenant=tenant).exists()

    jwt_client = bearer_client(oidc.token(tenant))
    for label, method, template, body, expected in ENDPOINTS:
        path = template.format(**ids)
        clients = [("api key", good), ("jwt", jwt_client)] if label not in ONCE else [("jwt", jwt_client)]
        for how, client in clients:
            resp = _call(client, method, path, body)
            assert resp.status_code == expected, (label, how, resp.status_code, resp.content[:300])
    assert Job.objects.get(pk=ids["active"]).status == Job.Status.CANCELLED
    assert Batch.objects.get(pk=ids["batch_active"]).status == Batch.Status.CANCELLED
    # The JWKS was fetched once and then served from PyJWKClient's cache.
    assert oidc.fetches <= 2


@pytest.mark.django_db(transaction=True)
def test_probes_need_no_credentials_even_with_bad_ones():
    for client in (APIClient(), key_client("nope.nope"), bearer_client("x.y.z")):
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code in (200, 503)  # readiness, not authentication


@pytest.mark.django_db(transaction=True)
def test_tenants_see_only_their_own_jobs_on_every_endpoint(settled, oidc, api, user):
    a, b = f"tenant-a-{uuid.uuid4().hex[:6]}", f"tenant-b-{uuid.uuid4().hex[:6]}"
    _, a_raw = new_key(a)
    a_key = key_client(a_raw)
    a_jwt = bearer_client(oidc.token(a))  # same tenant through a token: same jobs
    b_jwt = bearer_client(oidc.token(b))
    ids = _done_and_active_jobs(a_key, a)
    b_resp = upload(b_jwt, None, name="b.pdf", data=text_pdf("tenant b's own document"))
    assert b_resp.status_code == 202
    b_job = b_resp.json()["id"]

    job = Job.objects.get(pk=ids["done"])
    assert job.tenant == a and job.owner is None  # a key has a tenant, not a Django user
    assert Job.objects.get(pk=b_job).tenant == b

    for other, own_ids in ((b_jwt, {b_job}), (api, set())):  # B by JWT, C by Django token
        for path in (
            f"/api/v1/jobs/{ids['done']}",
            f"/api/v1/jobs/{ids['done']}/result",
            f"/status/{ids['done']}",
            f"/api/v1/jobs/{ids['active']}",
        ):
            resp = other.get(path)
            assert resp.status_code == 404, (path, resp.status_code)
            assert resp.json()["error"]["code"] == "job:not-found"
        resp = other.delete(f"/api/v1/jobs/{ids['active']}")
        assert resp.status_code == 404
        listed = {j["id"] for j in other.get("/api/v1/jobs").json()["results"]}
        assert listed == own_ids
        for path in (f"/api/v1/batches/{ids['batch_done']}", f"/api/v1/batches/{ids['batch_done']}/manifest"):
            resp = other.get(path)
            assert resp.status_code == 404 and resp.json()["error"]["code"] == "batch:not-found", path
        assert other.delete(f"/api/v1/batches/{ids['batch_active']}").status_code == 404
        assert other.get("/api/v1/batches").json()["results"] == []
        # Another tenant's prefix is not this one's to read.
        resp = other.post("/api/v1/batches", {"prefix": BATCH_PREFIX}, format="json")
        assert resp.status_code == 403 and resp.json()["error"]["code"] == "batch:prefix-not-allowed"

    # Every endpoint in ENDPOINTS, those added after this test included (the endpoint recipe's
    # last step): called by another tenant, an id of A's is not found, and no answer names one.
    for label, method, template, body, _ in ENDPOINTS:
        for other in (b_jwt, api):
            resp = _call(other, method, template.format(**ids), body)
            answer = resp.content.decode(errors="replace")
            assert not [i for i in ids.values() if i in answer], (label, resp.status_code, answer[:300])
            if any(f"{{{name}}}" in template for name in ids):
                assert resp.status_code == 404, (label, resp.status_code, answer[:300])

    assert Job.objects.get(pk=ids["active"]).status != Job.Status.CANCELLED  # B's cancel did nothing
    assert Batch.objects.get(pk=ids["batch_active"]).status == Batch.Status.RUNNING
    for client in (a_key, a_jwt):
        listed = {j["id"] for j in client.get("/api/v1/jobs").json()["results"]}
        assert listed == {ids["done"], ids["active"]}
        assert client.get(f"/api/v1/jobs/{ids['done']}/result").status_code == 200
        assert client.get(f"/api/v1/jobs/{b_job}").status_code == 404
    assert a_jwt.delete(f"/api/v1/jobs/{ids['active']}").status_code == 202
    # The Django token user acts for the tenant it was linked to (the fixture names it as the user).
    mine = upload(api, None, name="c.pdf", data=text_pdf("tenant c"))
    assert Job.objects.get(pk=mine.json()["id"]).tenant == user.username
    assert wait_for_job(b_jwt, b_job)["status"] == "done"


@pytest.mark.django_db(transaction=True)
def test_token_without_tenant_claim_is_refused(oidc):
    token = oidc.token("")  # an empty tenant claim
    resp = bearer_client(token).get("/api/v1/jobs")
    assert resp.status_code == 401
    assert "tenant" in resp.json()["error"]["message"]


@pytest.mark.django_db(transaction=True)
def test_jwks_from_a_file(issuer, settings, tmp_path):
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(issuer.jwks))
    for name, value in issuer.settings().items():
        setattr(settings, name, value)
    settings.OIDC_JWKS_URL = "http://127.0.0.1:9/unused"  # the file wins; this would fail to connect
    settings.OIDC_JWKS_FILE = str(path)
    assert bearer_client(issuer.token("filed")).get("/api/v1/jobs").status_code == 200
    assert bearer_client(issuer.hs256_confused_token("filed")).get("/api/v1/jobs").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_api_key_is_stored_hashed_and_shown_by_prefix(admin_client):
    key, raw = new_key("hashed")
    prefix, secret = raw.split(".")
    assert key.prefix == prefix and secret not in key.hashed_key and raw not in key.id
    page = admin_client.get("/admin/api/tenantapikey/").content.decode()
    assert prefix in page and secret not in page
    # Created in the admin: the key is shown once, in the message after saving.
    Tenant.objects.create(slug="admin-made")  # a key names a tenant that exists
    resp = admin_client.post(
        "/admin/api/tenantapikey/add/", {"name": "from admin", "tenant": "admin-made"}, follow=True
    )
    assert resp.status_code == 200
    made = [m.message for m in resp.context["messages"] if "API key" in m.message]
    assert made, "the admin shows the new key once"
    shown = made[0].split("is: ")[1].split(". ")[0]
    assert key_client(shown).get("/api/v1/jobs").status_code == 200
    # Revoked in the admin: the key stops working at once.
    obj = key.__class__.objects.get(tenant="admin-made")
    change = reverse("admin:api_tenantapikey_change", args=[obj.pk])
    resp = admin_client.post(change, {"name": "from admin", "tenant": "admin-made", "revoked": "on"})
    assert resp.status_code == 302, resp.content[:500]
    assert key_client(shown).get("/api/v1/jobs").status_code == 401


@pytest.mark.django_db(transaction=True)
def test_create_api_key_command_prints_a_working_key_once():
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_key", "cli-tenant", stdout=out, stderr=err)
    raw = out.getvalue().strip()
    assert raw.split(".")[0] in err.getvalue() and raw not in err.getvalue()
    resp = key_client(raw, header="authorization").get("/api/v1/jobs")
    assert resp.status_code == 200


@pytest.mark.django_db(transaction=True)
def test_unknown_signing_key_is_401_and_an_unreachable_issuer_is_503(issuer, settings):
    for name, value in issuer.settings().items():
        setattr(settings, name, value)
    stranger = Issuer()  # a different key pair claiming the same issuer
    try:
        forged = jwt.encode(
            issuer.claims("mallory"), stranger.private_key, algorithm="RS256", headers={"kid": stranger.kid}
        )
        resp = bearer_client(forged).get("/api/v1/jobs")
        assert resp.status_code == 401 and "signing key" in resp.json()["error"]["message"]
        fetched = issuer.fetches
        for _ in range(5):  # more made-up kids: refused without asking the issuer again
            assert bearer_client(forged).get("/api/v1/jobs").status_code == 401
        assert issuer.fetches == fetched
        # Same kid as the real key, wrong private key: the signature check fails.
        forged = jwt.encode(
            issuer.claims("mallory"), stranger.private_key, algorithm="RS256", headers={"kid": issuer.kid}
        )
        assert bearer_client(forged).get("/api/v1/jobs").status_code == 401
    finally:
        stranger.close()
    settings.OIDC_JWKS_URL = "http://127.0.0.1:9/jwks.json"  # nothing listens on the discard port
    resp = bearer_client(issuer.token("t")).get("/api/v1/jobs")
    assert resp.status_code == 503
    assert resp.json()["error"]["code"] == "auth:jwks-unavailable"
