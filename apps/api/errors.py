"""One error shape for every refusal: ``{"error": {"code": "...", "message": "..."}}``.

Codes are stable strings clients can branch on; messages are for people.
"""

from __future__ import annotations

import logging

import redis
from django.http import Http404
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


def exception_handler(exc, context):
    if isinstance(exc, _UNAVAILABLE):
        log.warning("refused while Redis is unreachable: %s", exc)
        exc = ApiError(
            503,
            ErrorCode.BUSY_UNAVAILABLE,
            "the queue is unreachable for a moment; retry later",
            headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER)},
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
