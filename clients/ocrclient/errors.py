"""The API's refusals as exceptions, each carrying the platform's stable error code.

The platform answers every refusal as ``{"error": {"code": "...", "message": "..."}}``; the code's
prefix says who refused (``input:``, ``job:``, ``auth:``, ``rate:``...). Branch on the class for a
family, on ``exc.code`` for one case.
"""

from __future__ import annotations

import httpx


class OcrError(Exception):
    """Anything this client raises."""


class ApiError(OcrError):
    """The API refused a request. ``code`` is the platform's stable string; ``status`` the HTTP status."""

    def __init__(self, status: int, code: str, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


class InputRejected(ApiError):
    """The document itself was refused (``input:*``, ``idempotency:conflict``): do not resend it as is."""


class RequestInvalid(ApiError):
    """The request was malformed (``request:*``)."""


class AuthError(ApiError):
    """Missing, invalid or insufficient credentials (``auth:*``)."""


class JobNotFound(ApiError):
    """No such job for this tenant (``job:not-found``)."""


class JobNotReady(ApiError):
    """The result was asked for before the job was done (``job:not-ready``)."""


class JobNotCancellable(ApiError):
    """The job already finished (``job:not-cancellable``)."""


class ResultPurged(ApiError):
    """The job's result passed retention and was deleted (``job:result-purged``)."""


class RateLimited(ApiError):
    """A tenant limit or quota (``rate:*``, ``quota:*``); ``retry_after`` says when to come back."""


class Busy(ApiError):
    """The platform sheds load (``busy:backpressure``, or any 503); retry after ``retry_after``."""


class ServerError(ApiError):
    """A 5xx without a platform code: a proxy, or a bug on the platform's side."""


class JobFailed(OcrError):
    """``wait()`` saw the job end in ``failed`` or ``cancelled``."""

    def __init__(self, job) -> None:
        code = job.error.code if job.error else job.status
        message = job.error.message if job.error else ""
        super().__init__(f"job {job.id} {job.status}: {code} {message}".rstrip())
        self.job = job
        self.code = code


class WaitTimeout(OcrError):
    """``wait()`` gave up before the job finished; the job keeps running."""

    def __init__(self, job_id: str, timeout: float, last) -> None:
        super().__init__(f"job {job_id} not finished after {timeout:g} s (last status: {last.status if last else '?'})")
        self.job_id = job_id
        self.last = last


_EXACT: dict[str, type[ApiError]] = {
    "job:not-found": JobNotFound,
    "job:not-ready": JobNotReady,
    "job:not-cancellable": JobNotCancellable,
    "job:result-purged": ResultPurged,
    "idempotency:conflict": InputRejected,
    "busy:backpressure": Busy,
}
_PREFIX: dict[str, type[ApiError]] = {
    "input": InputRejected,
    "request": RequestInvalid,
    "auth": AuthError,
    "rate": RateLimited,
    "quota": RateLimited,
}


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare from this API; fall back to backoff


def error_from_response(response: httpx.Response) -> ApiError:
    """The exception for a non-2xx answer, from the platform's error body when there is one."""
    code, message = "", response.reason_phrase or ""
    try:
        body = response.json()
        code = str(body["error"]["code"])
        message = str(body["error"].get("message", message))
    except (ValueError, KeyError, TypeError):
        message = response.text[:300] or message
    cls = _EXACT.get(code) or _PREFIX.get(code.partition(":")[0])
    if cls is None:
        if response.status_code == 503:
            cls = Busy
        elif response.status_code == 429:
            cls = RateLimited
        elif response.status_code >= 500:
            cls = ServerError
        else:
            cls = ApiError
    return cls(
        response.status_code, code or f"http:{response.status_code}", message, retry_after=_retry_after(response)
    )
