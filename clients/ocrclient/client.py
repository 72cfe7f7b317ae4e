"""Sync and async clients for the platform's REST API (``/api/v1/jobs``).

Every request goes through one retry policy (tenacity): connection errors, 502/503/504, 429 and
``busy:`` refusals are retried with exponential backoff, sleeping exactly ``Retry-After`` when the
server names it (up to ``max_retry_after``; a longer wait, such as a daily quota, is raised at
once). Submissions carry an ``Idempotency-Key`` chosen before the first attempt, so a POST whose
answer was lost and is sent again returns the job the first one made instead of a second job.
"""

from __future__ import annotations

import asyncio
import json
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
from ocrclient.models import Batch, Document, Job

DEFAULT_BASE_URL = "http://127.0.0.1:8000"
Source = str | os.PathLike | bytes | IO[bytes]
ProgressCallback = Callable[[Job], None]
# Above this a document goes straight to object storage (POST /api/v1/uploads) instead of through
# the web tier, whose own limit is 10 MiB by default.
DIRECT_UPLOAD_ABOVE = 8 * 1024 * 1024
_CHUNK = 1 << 20


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


@dataclass(frozen=True)
class _Document:
    """A document to send: a file's path (read as it is sent, never whole) or its bytes."""

    name: str
    size: int
    path: Path | None = None
    data: bytes | None = None

    def head(self, n: int = 1024) -> bytes:
        if self.data is not None:
            return self.data[:n]
        with self.path.open("rb") as fh:
            return fh.read(n)

    def read(self) -> bytes:
        return self.data if self.data is not None else self.path.read_bytes()


def _document(source: Source, filename: str | None) -> _Document:
    """Read once (or stat once), so every retry sends the same document."""
    if isinstance(source, bytes):
        return _Document(filename or "document", len(source), data=source)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        return _Document(filename or path.name, path.stat().st_size, path=path)
    data = source.read()
    return _Document(filename or Path(getattr(source, "name", "document")).name, len(data), data=data)


def content_type_of(head: bytes) -> str:
    """The declared type of a direct upload, from the magic bytes (the server checks them again)."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return "image/tiff"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"BM"):
        return "image/bmp"
    return "application/pdf"  # the header may sit anywhere in the first KiB; the server decides


def _slot_request(doc: _Document) -> dict[str, Any]:
    return {"filename": doc.name, "size": doc.size, "content_type": content_type_of(doc.head())}


def _bucket_request(slot: dict[str, Any], doc: _Document, body: Any) -> dict[str, Any]:
    """httpx arguments that send ``body`` as the presigned slot says (POST form or PUT)."""
    if slot["method"] == "POST":
        return {"data": slot["fields"], "files": {"file": (doc.name, body, slot["content_type"])}}
    return {"content": body, "headers": {**slot["headers"], "Content-Length": str(doc.size)}}


async def _chunks(path: Path):
    with path.open("rb") as fh:
        while chunk := await asyncio.to_thread(fh.read, _CHUNK):
            yield chunk


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
        direct_upload_above: int | None = None,
    ) -> None:
        if direct_upload_above is None:
            direct_upload_above = int(os.environ.get("OCR_DIRECT_UPLOAD_ABOVE") or DIRECT_UPLOAD_ABOVE)
        self.direct_upload_above = direct_upload_above
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
        """Upload a document; returns at once with the queued job (``job.replayed`` on a repeat key).

        Above ``direct_upload_above`` bytes the document goes straight to object storage through a
        presigned upload, then the job is created from it."""
        doc = _document(source, filename)
        key = idempotency_key or str(uuid.uuid4())
        if doc.size > self.direct_upload_above:
            slot = self._request("POST", "/api/v1/uploads", json=_slot_request(doc)).json()
            self._send_to_bucket(slot, doc)
            response = self._request(
                "POST",
                "/api/v1/jobs",
                json={"upload": slot["id"], **_submit_fields(engine, ocr)},
                headers={"Idempotency-Key": key},
            )
        else:
            response = self._request(
                "POST",
                "/api/v1/jobs",
                files={"file": (doc.name, doc.read())},
                data=_submit_fields(engine, ocr),
                headers={"Idempotency-Key": key},
            )
        return Job.from_api(response.json(), replayed=response.headers.get("Idempotent-Replayed") == "true")

    def _send_to_bucket(self, slot: dict[str, Any], doc: _Document) -> None:
        # Not self._http: the bucket must not see our API credentials, and the URL is absolute.
        with httpx.Client(timeout=httpx.Timeout(self.timeout, write=None)) as bucket:
            for attempt in Retrying(**_retrying_kwargs(self.retry)):
                with attempt:
                    if doc.path is None:
                        _check(bucket.request(slot["method"], slot["url"], **_bucket_request(slot, doc, doc.data)))
                    else:
                        with doc.path.open("rb") as fh:
                            _check(bucket.request(slot["method"], slot["url"], **_bucket_request(slot, doc, fh)))

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

    def batch(
        self,
        *,
        prefix: str | None = None,
        keys: list[str] | None = None,
        uploads: list[str] | None = None,
        engine: str | None = None,
        ocr: str | None = None,
        pages: str | None = None,
    ) -> Batch:
        """Start a batch on the bulk lane: every object under ``prefix`` (within the tenant's batch
        prefixes), these object ``keys``, or these direct ``uploads``; one set of job options."""
        body: dict[str, Any] = {
            k: v for k, v in {"prefix": prefix, "keys": keys, "uploads": uploads}.items() if v is not None
        }
        body.update({k: v for k, v in {"engine": engine, "ocr": ocr, "pages": pages}.items() if v})
        return Batch.from_api(self._request("POST", "/api/v1/batches", json=body).json())

    def get_batch(self, batch_id: str) -> Batch:
        return Batch.from_api(self._request("GET", f"/api/v1/batches/{batch_id}").json())

    def cancel_batch(self, batch_id: str) -> Batch:
        return Batch.from_api(self._request("DELETE", f"/api/v1/batches/{batch_id}").json())

    def batch_manifest(self, batch_id: str) -> list[dict[str, Any]]:
        """One dict per item (job, status, pages, error, result links), once the batch has ended."""
        text = self._request("GET", f"/api/v1/batches/{batch_id}/manifest").text
        return [json.loads(line) for line in text.splitlines() if line.strip()]


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
        doc = _document(source, filename)
        key = idempotency_key or str(uuid.uuid4())
        if doc.size > self.direct_upload_above:
            slot = (await self._request("POST", "/api/v1/uploads", json=_slot_request(doc))).json()
            await self._send_to_bucket(slot, doc)
            response = await self._request(
                "POST",
                "/api/v1/jobs",
                json={"upload": slot["id"], **_submit_fields(engine, ocr)},
                headers={"Idempotency-Key": key},
            )
        else:
            response = await self._request(
                "POST",
                "/api/v1/jobs",
                files={"file": (doc.name, doc.read())},
                data=_submit_fields(engine, ocr),
                headers={"Idempotency-Key": key},
            )
        return Job.from_api(response.json(), replayed=response.headers.get("Idempotent-Replayed") == "true")

    async def _send_to_bucket(self, slot: dict[str, Any], doc: _Document) -> None:
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout, write=None)) as bucket:
            async for attempt in AsyncRetrying(**_retrying_kwargs(self.retry)):
                with attempt:
                    if doc.path is not None and slot["method"] == "PUT":
                        body: Any = _chunks(doc.path)
                    else:
                        body = doc.read()  # a multipart form is built from bytes in an async client
                    _check(await bucket.request(slot["method"], slot["url"], **_bucket_request(slot, doc, body)))

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

    async def batch(self, *, prefix: str | None = None, keys: list[str] | None = None, ocr: str | None = None) -> Batch:
        """Start a batch on the bulk lane (see ``Client.batch``)."""
        body: dict[str, Any] = {"prefix": prefix} if prefix is not None else {"keys": keys or []}
        if ocr:
            body["ocr"] = ocr
        return Batch.from_api((await self._request("POST", "/api/v1/batches", json=body)).json())

    async def get_batch(self, batch_id: str) -> Batch:
        return Batch.from_api((await self._request("GET", f"/api/v1/batches/{batch_id}")).json())

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
