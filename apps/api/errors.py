"""One error shape for every refusal: ``{"error": {"code": "...", "message": "..."}}``.

Codes are stable strings clients can branch on; messages are for people.
"""

from __future__ import annotations

import logging
import sys

import redis
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from kombu.exceptions import OperationalError as BrokerError
from rest_framework import exceptions, status
from rest_framework.views import exception_handler as drf_exception_handler

from ocrsite.vocabulary import ErrorCode

# A refused document is a 422 unless its code says otherwise. HTTP lives here only: the rest of
# the platform speaks in codes, and ingest turns the same codes into failed jobs.
_INPUT_STATUS = {
    ErrorCode.INPUT_TOO_LARGE: 413,
    ErrorCode.INPUT_UNSUPPORTED_TYPE: 415,
    ErrorCode.IDEMPOTENCY_CONFLICT: 409,
    ErrorCode.INPUT_TYPE_MISMATCH: 415,
    ErrorCode.UPLOAD_NOT_FOUND: 404,
    ErrorCode.UPLOAD_MISSING: 409,
    ErrorCode.UPLOAD_EXPIRED: 410,
    ErrorCode.UPLOAD_BAD_TOKEN: 403,
    ErrorCode.REQUEST_BAD_PAGES: 400,
    ErrorCode.REQUEST_INVALID: 400,
    ErrorCode.BATCH_PREFIX_NOT_ALLOWED: 403,
    ErrorCode.BATCH_EMPTY: 400,
    ErrorCode.BATCH_TOO_MANY_ITEMS: 413,
}


def input_status(code: str) -> int:
    return _INPUT_STATUS.get(code, 422)


_CODES = {
    exceptions.NotAuthenticated: ErrorCode.AUTH_NOT_AUTHENTICATED,
    exceptions.AuthenticationFailed: ErrorCode.AUTH_INVALID_CREDENTIALS,
    exceptions.PermissionDenied: ErrorCode.AUTH_FORBIDDEN,
    exceptions.NotFound: ErrorCode.JOB_NOT_FOUND,
    exceptions.MethodNotAllowed: ErrorCode.REQUEST_METHOD_NOT_ALLOWED,
    exceptions.Throttled: ErrorCode.RATE_THROTTLED,
    exceptions.ValidationError: ErrorCode.REQUEST_INVALID,
    exceptions.ParseError: ErrorCode.REQUEST_MALFORMED,
    exceptions.UnsupportedMediaType: ErrorCode.REQUEST_UNSUPPORTED_MEDIA_TYPE,
    exceptions.NotAcceptable: ErrorCode.REQUEST_NOT_ACCEPTABLE,
}


class ApiError(exceptions.APIException):
    """Raise from a view to refuse with a given status and code."""

    def __init__(self, status_code: int, code: str, message: str, headers: dict | None = None) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.error_code = str(code)
        self.headers = headers or {}


def error_body(code: str, message: str, **extra) -> dict:
    return {"error": {"code": str(code), "message": message, **extra}}


log = logging.getLogger(__name__)

# Redis down: the limits' counters and the broker live there. The door refuses (503, retry later)
# rather than admit uncounted work; what it already accepted is in PostgreSQL and survives.
_UNAVAILABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, BrokerError)
UNAVAILABLE_RETRY_AFTER = 5


# PostgreSQL out of reach: connection refused or dropped, the server shutting down, crashed or
# still in crash recovery, or out of connection slots. The psycopg error Django wraps says which
# (no SQLSTATE: the client library lost the socket). A query's own failure (a deadlock, a
# statement timeout) is not this and stays a 500.
_UNREACHABLE_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "53300"})
DATABASE_RETRY_AFTER = 5
_DATABASE_MESSAGE = "the database is unreachable for a moment; retry later"


def database_unreachable(exc: BaseException | None) -> bool:
    if isinstance(exc, InterfaceError):  # a connection already closed under Django
        return True
    if not isinstance(exc, OperationalError):
        return False
    sqlstate = getattr(exc.__cause__, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in _UNREACHABLE_SQLSTATES


def exception_handler(exc, context):
    if isinstance(exc, _UNAVAILABLE):
        log.warning("refused while Redis is unreachable: %s", exc)
        exc = ApiError(
            503,
            ErrorCode.BUSY_UNAVAILABLE,
            "the queue is unreachable for a moment; retry later",
            headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER)},
        )
    elif database_unreachable(exc):
        log.warning("refused while PostgreSQL is unreachable: %s", exc)
        exc = ApiError(
            503, ErrorCode.BUSY_DATABASE, _DATABASE_MESSAGE, headers={"Retry-After": str(DATABASE_RETRY_AFTER)}
        )
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ApiError):
        response.data = error_body(exc.error_code, str(exc.detail))
        for key, value in exc.headers.items():
            response[key] = value
        return response
    if isinstance(exc, Http404):  # get_object's 404 (another tenant's job, or none): DRF's NotFound
        exc = exceptions.NotFound(str(exc) or "no such job")
    code = next((c for cls, c in _CODES.items() if isinstance(exc, cls)), ErrorCode.REQUEST_ERROR)
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body(code, "the request is not valid", fields=response.data)
    else:
        detail = getattr(exc, "detail", "")
        response.data = error_body(code, str(detail))
    if response.status_code == status.HTTP_401_UNAUTHORIZED and "WWW-Authenticate" not in response:
        response["WWW-Authenticate"] = "Token"
    return response


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: an exception nothing else handled, in a middleware (sessions, auth, axes),
    a plain Django view or the admin. A lost database is a 503 there too, so no path answers 500
    while PostgreSQL restarts; anything else keeps Django's 500 page."""
    if database_unreachable(sys.exc_info()[1]):
        response = JsonResponse(error_body(ErrorCode.BUSY_DATABASE, _DATABASE_MESSAGE), status=503)
        response["Retry-After"] = str(DATABASE_RETRY_AFTER)
        return response
    return defaults.server_error(request)
