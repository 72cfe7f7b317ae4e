"""One error shape for every refusal: ``{"error": {"code": "...", "message": "..."}}``.

Codes are stable strings clients can branch on; messages are for people.
"""

from __future__ import annotations

from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.views import exception_handler as drf_exception_handler

_CODES = {
    exceptions.NotAuthenticated: "auth:not-authenticated",
    exceptions.AuthenticationFailed: "auth:invalid-credentials",
    exceptions.PermissionDenied: "auth:forbidden",
    exceptions.NotFound: "job:not-found",
    exceptions.MethodNotAllowed: "request:method-not-allowed",
    exceptions.Throttled: "rate:throttled",
    exceptions.ValidationError: "request:invalid",
    exceptions.ParseError: "request:malformed",
    exceptions.UnsupportedMediaType: "request:unsupported-media-type",
    exceptions.NotAcceptable: "request:not-acceptable",
}


class ApiError(exceptions.APIException):
    """Raise from a view to refuse with a given status and code."""

    def __init__(self, status_code: int, code: str, message: str, headers: dict | None = None) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.error_code = code
        self.headers = headers or {}


def error_body(code: str, message: str, **extra) -> dict:
    return {"error": {"code": code, "message": message, **extra}}


def exception_handler(exc, context):
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
    code = next((c for cls, c in _CODES.items() if isinstance(exc, cls)), "request:error")
    if isinstance(exc, exceptions.ValidationError):
        response.data = error_body(code, "the request is not valid", fields=response.data)
    else:
        detail = getattr(exc, "detail", "")
        response.data = error_body(code, str(detail))
    if response.status_code == status.HTTP_401_UNAUTHORIZED and "WWW-Authenticate" not in response:
        response["WWW-Authenticate"] = "Token"
    return response
