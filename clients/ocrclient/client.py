"""Sync and async clients for the platform's REST API (``/api/v1/jobs``).

Every request goes through one retry policy (tenacity): connection errors, 502/503/504, 429 and
``busy:`` refusals are retried with exponential backoff, sleeping exactly ``Retry-After`` when the
server names it (up to ``max_retry_after``; a longer wait, such as a daily quota, is raised at
once). Submissions carry an ``Idempotency-Key`` chosen before the first attempt, so a POST whose
answer was lost and is sent again returns the job the first one made instead of a second job.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential_jitter,
)

from ocrclient.errors import ApiError, Busy, JobFailed, RateLimited, ServerError, WaitTimeout, error_from_response
from ocrclient.models import Document, Job

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
Source = str | os.PathLike | bytes | IO[bytes]
ProgressCallback = Callable[[Job], None]


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 6
    max_elapsed: float = 300.0  # seconds across all attempts of one call
    initial: float = 0.5
    max_backoff: float = 30.0
    # A Retry-After longer than this (a daily quota) is the caller's decision, not a sleep.
    max_retry_after: float = 120.0


def _retryable(policy: RetryPolicy) -> Callable[[BaseException], bool]:
    def check(exc: BaseException) -> bool:
        if isinstance(exc, httpx.TransportError):
            return True
        if isinstance(exc, (RateLimited, Busy)):
            return exc.retry_after is None or exc.retry_after <= policy.max_retry_after
        return isinstance(exc, ServerError) and exc.status in (502, 503, 504)

    return check


class _Wait:
    """Sleep what the server asked for (Retry-After), else exponential backoff with jitter."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.backoff = wait_exponential_jitter(multiplier=policy.initial, max=policy.max_backoff)

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ApiError) and exc.retry_after is not None:
            return exc.retry_after
        return self.backoff(state)


def _retrying_kwargs(policy: RetryPolicy) -> dict[str, Any]:
    return {
        "retry": retry_if_exception(_retryable(policy)),
        "wait": _Wait(policy),
        "stop": stop_after_attempt(policy.attempts) | stop_after_delay(policy.max_elapsed),
        "reraise": True,
    }


def _auth_headers(api_key: str | None, token: str | None) -> dict[str, str]:
    if api_key:
        return {"Authorization": f"Api-Key {api_key}"}
    if token:
        return {"Authorization": f"Bearer {token}"}
    return {}


def _payload(source: Source, filename: str | None) -> tuple[str, bytes]:
    """The bytes once, so every retry sends the same document."""
    if isinstance(source, bytes):
        return filename or "document", source
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        return filename or path.name, path.read_bytes()
    data = source.read()
    return filename or Path(getattr(source, "name", "document")).name, data


def _check(response: httpx.Response) -> httpx.Response:
    if response.is_success:
        return response
    raise error_from_response(response)


def _submit_fields(engine: str | None, ocr: str | None) -> dict[str, str]:
    fields = {}
    if engine:
        fields["engine"] = engine
    if ocr:
        fields["ocr"] = ocr
    return fields


class _Base:
    def __init__(
        self,
        base_url: str | None = None,
        *,
        api_key: str | None = None,
        token: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.base_url = (base_url or os.environ.get("OCR_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        if api_key is None and token is None:
            api_key = os.environ.get("OCR_API_KEY") or None
            token = os.environ.get("OCR_TOKEN") or None
        self.headers = {"User-Agent": "ocr-platform-client/0.1", **_auth_headers(api_key, token)}
        self.timeout = timeout
        self.retry = retry or RetryPolicy()


class Client(_Base):
    """Blocking client. ``httpx_options`` go to ``httpx.Client`` (transport, event_hooks, verify...)."""

    def __init__(self, base_url: str | None = None, **kwargs: Any) -> None:
        httpx_options = kwargs.pop("httpx_options", {})
        super().__init__(base_url, **kwargs)
        self._http = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=self.timeout, **httpx_options)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        for attempt in Retrying(**_retrying_kwargs(self.retry)):
            with attempt:
                return _check(self._http.request(method, url, **kwargs))
        raise AssertionError("unreachable: tenacity reraises")

    def submit(
        self,
        source: Source,
        *,
        filename: str | None = None,
        engine: str | None = None,
        ocr: str | None = None,
        idempotency_key: str | None = None,
    ) -> Job:
        """Upload a document; returns at once with the queued job (``job.replayed`` on a repeat key)."""
        name, data = _payload(source, filename)
        key = idempotency_key or str(uuid.uuid4())
        response = self._request(
            "POST",
            "/api/v1/jobs",
            files={"file": (name, data)},
            data=_submit_fields(engine, ocr),
            headers={"Idempotency-Key": key},
        )
        return Job.from_api(response.json(), replayed=response.headers.get("Idempotent-Replayed") == "true")

    def get(self, job_id: str) -> Job:
        return Job.from_api(self._request("GET", f"/api/v1/jobs/{job_id}").json())

    def cancel(self, job_id: str) -> Job:
        return Job.from_api(self._request("DELETE", f"/api/v1/jobs/{job_id}").json())

    def list(self, status: str | None = None, limit: int | None = None) -> list[Job]:
        jobs: list[Job] = []
        url: str | None = "/api/v1/jobs"
        params = {"status": status} if status else None
        while url and (limit is None or len(jobs) < limit):
            body = self._request("GET", url, params=params).json()
            jobs.extend(Job.from_api(j) for j in body.get("results", []))
            url, params = body.get("next"), None
        return jobs[:limit] if limit is not None else jobs

    def wait(
        self,
        job_id: str,
        *,
        timeout: float = 600.0,
        on_progress: ProgressCallback | None = None,
        poll_interval: float = 0.5,
        raise_on_failure: bool = True,
    ) -> Job:
        """Poll until the job finishes; ``on_progress(job)`` on every change. Raises ``WaitTimeout``."""
        deadline = time.monotonic() + timeout
        last: Job | None = None
        interval = poll_interval
        while True:
            job = self.get(job_id)
            if on_progress and (last is None or (job.status, job.progress) != (last.status, last.progress)):
                on_progress(job)
            last = job
            if job.finished:
                if raise_on_failure and job.status != "done":
                    raise JobFailed(job)
                return job
            if time.monotonic() >= deadline:
                raise WaitTimeout(job_id, timeout, last)
            time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
            interval = min(interval * 1.5, 5.0)

    def markdown(self, job_id: str) -> str:
        return self._request("GET", f"/api/v1/jobs/{job_id}/result", params={"format": "markdown"}).text

    def document(self, job_id: str) -> Document:
        return Document.from_api(
            self._request("GET", f"/api/v1/jobs/{job_id}/result", params={"format": "json"}).json()
        )

    def save(self, job_id: str, path: str | os.PathLike, fmt: str = "markdown") -> Path:
        """Write the result to ``path`` atomically (a partial file never looks finished)."""
        response = self._request("GET", f"/api/v1/jobs/{job_id}/result", params={"format": fmt})
        return write_atomic(Path(path), response.content)

    def health(self) -> bool:
        return self._http.get("/healthz").is_success


class AsyncClient(_Base):
    """The same API for asyncio programs (and the MCP servers)."""

    def __init__(self, base_url: str | None = None, **kwargs: Any) -> None:
        httpx_options = kwargs.pop("httpx_options", {})
        super().__init__(base_url, **kwargs)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=self.headers, timeout=self.timeout, **httpx_options
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        async for attempt in AsyncRetrying(**_retrying_kwargs(self.retry)):
            with attempt:
                return _check(await self._http.request(method, url, **kwargs))
        raise AssertionError("unreachable: tenacity reraises")

    async def submit(
        self,
        source: Source,
        *,
        filename: str | None = None,
        engine: str | None = None,
        ocr: str | None = None,
        idempotency_key: str | None = None,
    ) -> Job:
        name, data = _payload(source, filename)
        key = idempotency_key or str(uuid.uuid4())
        response = await self._request(
            "POST",
            "/api/v1/jobs",
            files={"file": (name, data)},
            data=_submit_fields(engine, ocr),
            headers={"Idempotency-Key": key},
        )
        return Job.from_api(response.json(), replayed=response.headers.get("Idempotent-Replayed") == "true")

    async def get(self, job_id: str) -> Job:
        return Job.from_api((await self._request("GET", f"/api/v1/jobs/{job_id}")).json())

    async def cancel(self, job_id: str) -> Job:
        return Job.from_api((await self._request("DELETE", f"/api/v1/jobs/{job_id}")).json())

    async def wait(
        self,
        job_id: str,
        *,
        timeout: float = 600.0,
        on_progress: ProgressCallback | None = None,
        poll_interval: float = 0.5,
        raise_on_failure: bool = True,
    ) -> Job:
        deadline = time.monotonic() + timeout
        last: Job | None = None
        interval = poll_interval
        while True:
            job = await self.get(job_id)
            if on_progress and (last is None or (job.status, job.progress) != (last.status, last.progress)):
                on_progress(job)
            last = job
            if job.finished:
                if raise_on_failure and job.status != "done":
                    raise JobFailed(job)
                return job
            if time.monotonic() >= deadline:
                raise WaitTimeout(job_id, timeout, last)
            await asyncio.sleep(min(interval, max(0.0, deadline - time.monotonic())))
            interval = min(interval * 1.5, 5.0)

    async def markdown(self, job_id: str) -> str:
        return (await self._request("GET", f"/api/v1/jobs/{job_id}/result", params={"format": "markdown"})).text

    async def document(self, job_id: str) -> Document:
        response = await self._request("GET", f"/api/v1/jobs/{job_id}/result", params={"format": "json"})
        return Document.from_api(response.json())


def write_atomic(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.part")
    with tmp.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)
    return path


__all__ = ["AsyncClient", "Client", "RetryPolicy"]
