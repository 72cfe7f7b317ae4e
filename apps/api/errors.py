"""One error shape for every refusal: ``{"error": {"code": "...", "message": "..."}}``, and one
table from code to HTTP status (``STATUS``).

Codes are stable strings clients can branch on; messages are for people. Views and services
raise (``ApiError``, ``InputError``); DRF's handler (``apps.api.handlers``) and ``refusals`` for
plain Django views answer with the code's status.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions

from apps.jobs.documents import InputError
from ocrsite.vocabulary import ErrorCode

# Every refusal's status, by its code: HTTP lives here only. The rest of the platform speaks in
# codes (``InputError`` from the services, ``ApiError`` from the API layer), and ingest turns the
# same input codes into failed jobs. A code missing here is a bug: tests/unit/test_errors.py checks
# every code the door can give has its line.
STATUS: dict[str, int] = {
    # The document.
    ErrorCode.INPUT_TOO_LARGE: 413,
    ErrorCode.INPUT_UNSUPPORTED_TYPE: 415,
    ErrorCode.INPUT_TYPE_MISMATCH: 415,
    ErrorCode.INPUT_EMPTY: 422,
    ErrorCode.INPUT_ENCRYPTED: 422,
    ErrorCode.INPUT_CORRUPT: 422,
    ErrorCode.INPUT_TOO_MANY_PAGES: 422,
    ErrorCode.INPUT_IMAGE_TOO_LARGE: 422,
    ErrorCode.INPUT_TOO_COMPLEX: 422,
    ErrorCode.IDEMPOTENCY_CONFLICT: 409,
    # Direct uploads.
    ErrorCode.UPLOAD_NOT_FOUND: 404,
    ErrorCode.UPLOAD_MISSING: 409,
    ErrorCode.UPLOAD_ALREADY_SENT: 409,
    ErrorCode.UPLOAD_EXPIRED: 410,
    ErrorCode.UPLOAD_BAD_TOKEN: 403,
    ErrorCode.UPLOAD_SIZE_MISMATCH: 422,
    # Jobs.
    ErrorCode.JOB_NOT_FOUND: 404,
    ErrorCode.JOB_NOT_READY: 409,
    ErrorCode.JOB_NOT_CANCELLABLE: 409,
    ErrorCode.JOB_RESULT_PURGED: 410,
    # Batches.
    ErrorCode.BATCH_NOT_FOUND: 404,
    ErrorCode.BATCH_NOT_READY: 409,
    ErrorCode.BATCH_NOT_CANCELLABLE: 409,
    ErrorCode.BATCH_PREFIX_NOT_ALLOWED: 403,
    ErrorCode.BATCH_EMPTY: 400,
    ErrorCode.BATCH_TOO_MANY_ITEMS: 413,
    ErrorCode.BATCH_ITEM_MISSING: 422,  # an item's code in the manifest (a failed job), not a door refusal
    # The request itself.
    ErrorCode.REQUEST_ERROR: 400,
    ErrorCode.REQUEST_INVALID: 400,
    ErrorCode.REQUEST_MALFORMED: 400,
    ErrorCode.REQUEST_METHOD_NOT_ALLOWED: 405,
    ErrorCode.REQUEST_UNSUPPORTED_MEDIA_TYPE: 415,
    ErrorCode.REQUEST_NOT_ACCEPTABLE: 406,
    ErrorCode.REQUEST_BAD_STATUS: 400,
    ErrorCode.REQUEST_BAD_FORMAT: 400,
    ErrorCode.REQUEST_BAD_IDEMPOTENCY_KEY: 400,
    ErrorCode.REQUEST_BAD_PAGES: 400,
    # A callback_url the deployment's egress cannot deliver (OCR_WEBHOOK_SCHEMES / _PORTS).
    ErrorCode.WEBHOOK_UNDELIVERABLE: 400,
    # Identity and limits.
    ErrorCode.AUTH_NOT_AUTHENTICATED: 401,
    ErrorCode.AUTH_INVALID_CREDENTIALS: 401,
    ErrorCode.AUTH_FORBIDDEN: 403,
    ErrorCode.AUTH_JWKS_UNAVAILABLE: 503,
    ErrorCode.RATE_THROTTLED: 429,
    ErrorCode.RATE_SUBMISSIONS: 429,
    ErrorCode.RATE_POLLS: 429,
    ErrorCode.QUOTA_PAGES_PER_DAY: 429,
    ErrorCode.BUSY_BACKPRESSURE: 503,
    ErrorCode.BUSY_UNAVAILABLE: 503,
    ErrorCode.BUSY_DATABASE: 503,
}
# A document refused with a code this table does not know yet is still the client's problem.
_UNLISTED = 422
# /readyz with a failed check: the orchestrator takes the pod out of rotation.
NOT_READY = 503


def status_of(code: str) -> int:
    return STATUS.get(code, _UNLISTED)


# DRF's own refusals, by class: their statuses agree with STATUS (tests/unit/test_errors.py).
DRF_CODES = {
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
    """Raise anywhere in the API layer to refuse with a code; its status is ``STATUS[code]``."""

    def __init__(self, code: str, message: str, headers: dict | None = None) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_of(code)
        self.error_code = str(code)
        self.headers = headers or {}


def refusal(exc: ApiError | InputError) -> ApiError:
    """A domain refusal (``InputError``, raised by the services) as the API's own."""
    return exc if isinstance(exc, ApiError) else ApiError(exc.code, exc.message)


def refusals(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """For a plain Django view (outside DRF's handler): a refusal it raises is answered in the
    one error shape with the code's status."""

    @functools.wraps(view)
    def answer(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return view(request, *args, **kwargs)
        except (ApiError, InputError) as exc:
            err = refusal(exc)
            response = JsonResponse(error_body(err.error_code, str(err.detail)), status=err.status_code)
            for key, value in err.headers.items():
                response[key] = value
            return response

    return answer


def error_body(code: str, message: str, **extra) -> dict:
    return {"error": {"code": str(code), "message": message, **extra}}
