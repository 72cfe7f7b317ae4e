"""Who is calling and which tenant they act for. The one place the API asks either question.

Three kinds of credential reach the API (settings ``REST_FRAMEWORK`` lists them, in this order):

- an API key (``Authorization: Api-Key <prefix>.<secret>`` or ``X-API-Key: <prefix>.<secret>``),
  a ``TenantAPIKey`` created and revoked in the admin; its ``tenant`` field names the tenant;
- an OIDC bearer token (``Authorization: Bearer <jwt>``) signed by the configured issuer, checked
  against the issuer's JWKS; the claim named by ``OIDC_TENANT_CLAIM`` names the tenant;
- a DRF token or a session, for Django users an operator linked to a tenant on purpose (a
  ``TenantUser`` row). A user without that link acts for no tenant and is refused (403): a
  username that happens to match a tenant's id grants nothing.

Tenants share one namespace: an API key for tenant ``acme`` and a token whose claim says ``acme``
see the same jobs. Every refusal is a 401 ``auth:invalid-credentials`` whose message says why.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.http import HttpRequest
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from apps.api.errors import ApiError
from apps.api.models import TenantAPIKey, TenantUser
from ocrsite.vocabulary import ErrorCode

# Keys are "<prefix>.<secret>" from get_random_string (ASCII letters and digits). Anything else is
# refused before it reaches the database (a NUL byte would make PostgreSQL raise).
_KEY_SHAPE = re.compile(r"[A-Za-z0-9]{1,64}\.[A-Za-z0-9]{1,128}")
# A JWT is three base64url segments; a cap on length keeps a hostile header cheap to refuse.
_JWT_SHAPE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*")
MAX_JWT_CHARS = 8192


@dataclass(frozen=True)
class Principal:
    """A caller that is not a Django user: an API key or an OIDC subject.

    It quacks like an authenticated user where DRF and Django look (``is_authenticated``), but it
    is never saved as a job's ``owner``: the job's ``tenant`` is what scopes it.
    """

    tenant: str
    name: str  # "api-key:<prefix>" or "oidc:<sub>": what the timeline records as the actor

    is_authenticated = True
    is_anonymous = False
    is_active = True
    is_staff = False
    is_superuser = False
    pk = None

    def get_username(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name


def tenant_of(request: Request) -> str:
    """The tenant a request acts for: the key's tenant, the token's tenant claim, or the tenant a
    Django user was linked to (``TenantUser``); "" for none."""
    user = request.user
    if user is None or not user.is_authenticated:
        return ""
    if isinstance(user, Principal):
        return user.tenant
    cached = getattr(user, "_api_tenant", None)  # asked several times per request (throttles, views)
    if cached is None:
        link = TenantUser.objects.filter(user_id=user.pk).select_related("tenant").first()
        cached = user._api_tenant = link.tenant.slug if link is not None else ""
    return cached


class ActsForTenant(BasePermission):
    """Authenticated, and acting for a tenant: the API's default permission."""

    message = "this account acts for no tenant (an operator links API users to a tenant)"

    def has_permission(self, request: Request, view) -> bool:
        return bool(request.user and request.user.is_authenticated and tenant_of(request))


def actor_of(request: Request) -> str:
    user = request.user
    return user.get_username() if user is not None and user.is_authenticated else ""


def owner_of(request: Request) -> AbstractBaseUser | None:
    """The Django user behind the request, if there is one (API keys and OIDC tokens have none)."""
    user = request.user
    return user if isinstance(user, AbstractBaseUser) and user.is_authenticated else None


# --- API keys ------------------------------------------------------------------------------------


class ApiKeyAuthentication(BaseAuthentication):
    """``Authorization: Api-Key <key>`` or ``X-API-Key: <key>``; revoked and expired keys fail."""

    keyword = "Api-Key"

    def authenticate(self, request: Request) -> tuple[Principal, TenantAPIKey] | None:
        key = self._presented_key(request)
        if key is None:
            return None
        if not _KEY_SHAPE.fullmatch(key):
            raise AuthenticationFailed("the API key is malformed")
        try:
            api_key = TenantAPIKey.objects.get_from_key(key)  # usable keys only: revoked ones fail here
        except TenantAPIKey.DoesNotExist:
            raise AuthenticationFailed("the API key is unknown or revoked") from None
        if api_key.has_expired:
            raise AuthenticationFailed("the API key has expired")
        return Principal(tenant=api_key.tenant, name=f"api-key:{api_key.prefix}"), api_key

    def authenticate_header(self, request: Request) -> str:
        # The first class's header is the one a 401 carries; clients of this API mostly use keys.
        return self.keyword

    @staticmethod
    def _presented_key(request: Request) -> str | None:
        scheme, _, value = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() == "api-key":
            return value.strip()
        header = request.META.get("HTTP_X_API_KEY")
        return header.strip() if header is not None else None


# --- OIDC bearer tokens --------------------------------------------------------------------------


class OIDCAuthentication(BaseAuthentication):
    """``Authorization: Bearer <jwt>`` from the issuer in ``OIDC_ISSUER``; off while that is empty.

    Checked: signature against the issuer's JWKS (the key is picked by ``kid``; the token's
    ``alg`` must be in ``OIDC_ALGORITHMS`` *and* match the key's algorithm, so neither ``none``
    nor an HMAC token "signed" with a public key can pass), ``iss``, ``aud``, ``exp`` (required),
    ``nbf``/``iat`` when present, and a non-empty string in the ``OIDC_TENANT_CLAIM`` claim.
    """

    def authenticate(self, request: Request) -> tuple[Principal, dict[str, Any]] | None:
        scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() != "bearer" or not settings.OIDC_ISSUER:
            return None
        claims = verify_token(token.strip())
        claim = settings.OIDC_TENANT_CLAIM
        tenant = claims.get(claim)
        if not isinstance(tenant, str) or not tenant.strip() or len(tenant) > 100:
            raise AuthenticationFailed(f"the token's {claim!r} claim must name a tenant (1-100 characters)")
        return Principal(tenant=tenant.strip(), name=f"oidc:{claims.get('sub', '')}"[:150]), claims

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


def verify_token(token: str) -> dict[str, Any]:
    """The verified claims of ``token``, or ``AuthenticationFailed`` saying what was wrong."""
    if len(token) > MAX_JWT_CHARS or not _JWT_SHAPE.fullmatch(token):
        raise AuthenticationFailed("the bearer token is not a JWT")
    allowed = list(settings.OIDC_ALGORITHMS)
    try:
        header = jwt.get_unverified_header(token)
        # Refuse a foreign algorithm before any JWKS traffic, so junk tokens cost nothing upstream.
        if header.get("alg") not in allowed:
            raise AuthenticationFailed(f"the token's algorithm {header.get('alg')!r} is not accepted")
        key = _signing_key(token, header)
        return jwt.decode(
            token,
            key,  # a PyJWK: verification uses the key's own algorithm, never the header's choice
            algorithms=allowed,
            audience=settings.OIDC_AUDIENCE,
            issuer=settings.OIDC_ISSUER,
            leeway=settings.OIDC_LEEWAY_SECONDS,
            options={"require": ["exp", "iss", "aud"]},
        )
    except jwt.ExpiredSignatureError:
        raise AuthenticationFailed("the token has expired") from None
    except jwt.InvalidAudienceError:
        raise AuthenticationFailed("the token is not for this audience") from None
    except jwt.InvalidIssuerError:
        raise AuthenticationFailed("the token is not from the configured issuer") from None
    except jwt.PyJWKClientConnectionError as exc:
        raise ApiError(ErrorCode.AUTH_JWKS_UNAVAILABLE, f"the issuer's keys cannot be fetched: {exc}") from exc
    except (jwt.PyJWKClientError, jwt.PyJWKError, jwt.PyJWKSetError) as exc:
        raise AuthenticationFailed(f"no usable signing key for the token: {exc}") from None
    except jwt.InvalidTokenError as exc:
        raise AuthenticationFailed(f"the token is not valid: {exc}") from None


_clients: dict[tuple[str, int], jwt.PyJWKClient] = {}
_files: dict[tuple[str, float], jwt.PyJWKSet] = {}
_lock = threading.Lock()


def _signing_key(token: str, header: dict[str, Any]) -> jwt.PyJWK:
    if settings.OIDC_JWKS_FILE:
        keys = _jwks_file(settings.OIDC_JWKS_FILE)
        kid = header.get("kid")
        for key in keys.keys:
            if kid is None or key.key_id == kid:
                return key
        raise jwt.PyJWKClientError(f"no key with kid {kid!r} in {settings.OIDC_JWKS_FILE}")
    return _jwks_client().get_signing_key_from_jwt(token)


def _jwks_client() -> jwt.PyJWKClient:
    """One client per URL and lifetime: it caches the key set and refetches on an unknown kid."""
    url = settings.OIDC_JWKS_URL or settings.OIDC_ISSUER.rstrip("/") + "/.well-known/jwks.json"
    cache_key = (url, settings.OIDC_JWKS_CACHE_SECONDS)
    with _lock:
        client = _clients.get(cache_key)
        if client is None:
            client = jwt.PyJWKClient(
                url,
                cache_jwk_set=True,
                lifespan=max(1, settings.OIDC_JWKS_CACHE_SECONDS),
                timeout=settings.OIDC_JWKS_TIMEOUT_SECONDS,
                # An unknown kid refetches the set (key rotation), at most once per 30 s, so
                # tokens with made-up kids cannot turn us into a JWKS request amplifier.
                cooldown_duration=30,
            )
            _clients[cache_key] = client
        return client


def _jwks_file(path: str) -> jwt.PyJWKSet:
    """The key set in a file (a mounted secret), re-read when the file changes."""
    file = Path(path)
    cache_key = (path, file.stat().st_mtime)
    with _lock:
        keys = _files.get(cache_key)
        if keys is None:
            keys = jwt.PyJWKSet.from_json(file.read_text())
            _files.clear()
            _files[cache_key] = keys
        return keys


# --- admin login throttling ------------------------------------------------------------------------


class LoginThrottleBackend(AxesStandaloneBackend):
    """django-axes' lockout check for logins that come with a request (the admin's login form).

    ``authenticate()`` without a request (the test client's ``login()``, management commands) is
    not an HTTP login attempt and cannot be brute-forced from outside, so it passes through to
    ModelBackend instead of raising as the stock backend does.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def client_ip(request: HttpRequest) -> str:
    """The caller's address for login throttling.

    Behind DJANGO_TRUSTED_PROXY_COUNT proxies each appends the address it saw to
    X-Forwarded-For, so the entry that many places from the right is the first one a client
    could not forge; without proxies, the socket's address.
    """
    hops = settings.DJANGO_TRUSTED_PROXY_COUNT
    if hops > 0:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= hops:
            return forwarded[-hops]
    return request.META.get("REMOTE_ADDR", "")
