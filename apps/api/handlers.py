"""What answers an exception: DRF's handler for the API's views, ``handler500`` for the rest.

Every refusal leaves in the one shape with its code's status (``apps.api.errors``); the stack's
own outages (Redis, PostgreSQL) become 503 refusals clients retry, never a 500.
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

from apps.api.errors import DRF_CODES, ApiError, error_body, refusal, status_of
from apps.jobs.documents import InputError
from ocrsite.vocabulary import ErrorCode

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
    if isinstance(exc, InputError):
        exc = refusal(exc)
    elif isinstance(exc, _UNAVAILABLE):
        log.warning("refused while Redis is unreachable: %s", exc)
        exc = ApiError(
            ErrorCode.BUSY_UNAVAILABLE,
            "the queue is unreachable for a moment; retry later",
            headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER)},
        )
    elif database_unreachable(exc):
        log.warning("refused while PostgreSQL is unreachable: %s", exc)
        exc = ApiError(ErrorCode.BUSY_DATABASE, _DATABASE_MESSAGE, headers={"Retry-After": str(DATABASE_RETRY_AFTER)})
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
    code = next((c for cls, c in DRF_CODES.items() if isinstance(exc, cls)), ErrorCode.REQUEST_ERROR)
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
        code = ErrorCode.BUSY_DATABASE
        response = JsonResponse(error_body(code, _DATABASE_MESSAGE), status=status_of(code))
        response["Retry-After"] = str(DATABASE_RETRY_AFTER)
        return response
    return defaults.server_error(request)
