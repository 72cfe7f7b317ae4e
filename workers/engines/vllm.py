"""``vllm`` recognizer: region crops (or whole pages) to a VLM behind vLLM's OpenAI-compatible API.

Guarantees:
- At most ``max_in_flight`` requests are open per worker process, however many threads call
  ``recognize`` at once (one event loop and one semaphore per process), and the HTTP pool holds
  exactly that many connections, so no request waits for a socket and none are opened beyond it.
  Keep the bound near vLLM's ``max-num-seqs`` so continuous batching stays full.
- Overload is not failure: 429, 503 and connection refused (a busy, restarting or scaled-to-zero
  server) are retried with backoff (the server's ``Retry-After`` when it sends one) and spend
  none of the ``retries`` budget, for up to ``overload_deadline_s`` from the first; past it the
  region fails with ``vllm:overloaded`` (a page whose every region did fails with it, without
  spending a page attempt on each 429). Other connection errors, timeouts and 5xx are retried
  ``retries`` times with exponential backoff and full jitter, each attempt under a total deadline
  (a slow trickle of bytes cannot hold a slot forever). A region that exhausts its budget fails
  alone with a stable code (``vllm:timeout``, ``vllm:unavailable``, ``vllm:server-error``,
  ``vllm:bad-request``); when every region of the page failed transiently the page raises a
  retryable EngineError.
- With ``global_max_in_flight`` set, every request also holds one of that many slots shared by all
  workers on the endpoint (``endpoint_slots``, a Redis lease), so scaling the tier out never
  sends vLLM more than it batches; waiting for a slot is overload too (same deadline).
- ``stopping`` (the worker's shutdown flag) ends every wait at once, backoff or slot: the page
  raises ``worker:draining`` and the stage hands it back to its queue. Requests already at the
  server are left to finish (each within ``timeout_s``).
- ``cancelled`` (a callable from the pipeline) is polled while requests are in flight; when it
  says so, the page's requests are cancelled, which closes their HTTP connections, and vLLM
  aborts those sequences on disconnect.
- Answers are cleaned (``vlm_output``): loops cut and flagged, chat artefacts stripped, tables
  checked. One-stage page profiles return their grounded blocks as ``Recognition.extra``.

Model behaviour (prompts, sampling, limits) is data in ``profiles.py``, not branches here.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import cv2
import numpy as np

from ocrsite.backoff import backoff_s
from ocrsite.vocabulary import ErrorCode
from workers.content import tables
from workers.engines import profiles, vlm_output
from workers.engines.base import NOT_READ_TASKS, EngineError, LayoutBox, Recognition, RegionText
from workers.engines.endpoint_slots import Drained, EndpointSlots, NoSlot
from workers.engines.settings import DeploymentSettings

if TYPE_CHECKING:
    import httpx2
    import openai

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class VllmConfig:
    base_url: str = ""
    profile: str = "glm-ocr"
    model: str = ""  # served model name; empty: the profile's
    api_key: str = "EMPTY"
    max_in_flight: int = 256
    timeout_s: float = 120.0  # total per attempt, connect to last byte
    connect_timeout_s: float = 5.0
    retries: int = 4  # attempts after the first
    backoff_s: float = 0.5
    backoff_max_s: float = 10.0
    max_tokens: int = 0  # 0 or above the profile's ceiling (profiles.token_ceiling): the ceiling
    cancel_poll_s: float = 0.5
    crop_padding: int = 4
    # 429 / 503 / connection refused / no free shared slot, waited out for this long per page.
    overload_deadline_s: float = 900.0
    # Requests in flight to this endpoint from all workers together (0: no shared cap), counted in
    # Redis at slots_url.
    global_max_in_flight: int = 0
    slots_url: str = ""
    # The worker's shutdown flag: true once it should hand its pages back rather than wait.
    stopping: Callable[[], bool] = field(default=lambda: False, compare=False)

    @classmethod
    def from_settings(cls, s: DeploymentSettings) -> VllmConfig:
        """The region recogniser's server (VLLM_*)."""
        return cls(
            **s.pick(
                base_url="VLLM_BASE_URL",
                profile="VLLM_PROFILE",
                model="VLLM_MODEL",
                api_key="VLLM_API_KEY",
                max_in_flight="VLLM_MAX_IN_FLIGHT",
                timeout_s="VLLM_TIMEOUT_S",
                retries="VLLM_RETRIES",
                backoff_s="VLLM_BACKOFF_S",
                max_tokens="VLLM_MAX_TOKENS",
                cancel_poll_s="VLLM_CANCEL_POLL_S",
                overload_deadline_s="VLLM_OVERLOAD_DEADLINE_S",
                global_max_in_flight="VLLM_GLOBAL_MAX_IN_FLIGHT",
                slots_url="CELERY_BROKER_URL",
            ),
            stopping=s.stopping,
        )

    @classmethod
    def page_from_settings(cls, s: DeploymentSettings) -> VllmConfig:
        """The one-stage page model's (VLLM_PAGE_*): the region server's unless set apart."""
        region = cls.from_settings(s)
        return replace(
            region,
            profile=s.get("VLLM_PAGE_PROFILE", "deepseek-ocr"),
            model=s.get("VLLM_PAGE_MODEL", ""),
            base_url=s.get("VLLM_PAGE_BASE_URL", "") or region.base_url,
        )


@dataclass(frozen=True)
class _Call:
    index: int  # region index in the page, -1 for a whole-page call
    task: str
    prompt: str
    image_url: str


@dataclass(frozen=True)
class _Answer:
    text: str = ""
    finish_reason: str | None = None
    latency_ms: int = 0
    gpu_ms: int = 0
    error: tuple[str, str] | None = None
    transient: bool = False
    handback: bool = False  # the worker is stopping: this region was not read, hand the page back


@dataclass
class _Shard:
    client: openai.AsyncOpenAI
    busy: int = 0


SHARD = 8  # connections per HTTP pool


class _Retryable(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = str(code)  # a plain string from here on: it is stored, logged and serialized


class _Overloaded(_Retryable):
    """The server said busy (429, 503), refused the connection, or no shared slot came free:
    nothing was read, nothing is wrong with the request; wait, and spend no retry on it."""

    def __init__(self, code: str, message: str, retry_after: float | None = None, *, pause: bool = True) -> None:
        super().__init__(code, message)
        self.retry_after = retry_after
        self.pause = pause  # False when the wait itself already took the time (a shared slot)


class VllmRecognizer:
    """One per worker process; thread-safe."""

    def __init__(self, config: VllmConfig) -> None:
        if not config.base_url:
            raise EngineError(
                ErrorCode.ENGINE_MISCONFIGURED,
                "the vllm recognizer needs VLLM_BASE_URL (e.g. http://vllm:8000/v1)",
                permanent=True,
            )
        try:
            self.profile = profiles.get(config.profile)
        except KeyError as exc:
            raise EngineError(ErrorCode.ENGINE_MISCONFIGURED, f"VLLM_PROFILE: {exc.args[0]}", permanent=True) from exc
        # One INFO line per request is noise at hundreds of requests a second.
        logging.getLogger("httpx2").setLevel(logging.WARNING)
        self.config = config
        self.model = config.model or self.profile["model"]
        self.name = f"vllm:{config.profile}"
        # A configured VLLM_MAX_TOKENS above the ceiling would make vLLM refuse every request.
        ceiling = profiles.token_ceiling(config.profile)
        self.max_tokens = min(config.max_tokens or ceiling, ceiling)
        self.in_flight = 0
        self.peak_in_flight = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-dispatch", daemon=True)
        self._thread.start()
        self._shards, self._slots = asyncio.run_coroutine_threadsafe(self._setup(), self._loop).result()
        self._endpoint = None
        if config.global_max_in_flight > 0 and config.slots_url:
            # A lease outlives the longest attempt, so only a dead holder's slot ever expires.
            self._endpoint = EndpointSlots(
                config.slots_url, config.base_url, config.global_max_in_flight, lease_s=config.timeout_s + 30
            )

    async def _setup(self) -> tuple[list[_Shard], asyncio.Semaphore]:
        """Clients whose pools add up to the bound. httpcore scans its whole pool for every
        request (measured: the largest cost per request with 256 connections), so the pool is
        split into shards of at most SHARD connections; a request takes the least busy shard,
        which always has a free connection while fewer than ``bound`` requests are in flight."""
        # Imported when a vLLM engine first runs: ~0.5 CPU-s (httpx2 builds its TLS context as it
        # loads) that processes which never call vLLM (the CLI, CPU workers) skip.
        import httpx2
        import openai

        bound = self.config.max_in_flight
        count = max(1, math.ceil(bound / SHARD))
        size = math.ceil(bound / count)
        # One TLS context for every shard: each client would otherwise load the CA bundle again
        # (~25 ms apiece, 0.75 s for the default 32 shards at every worker start).
        tls = httpx2.create_ssl_context()
        shards = []
        for _ in range(count):
            http = httpx2.AsyncClient(
                verify=tls,
                limits=httpx2.Limits(max_connections=size, max_keepalive_connections=size),
                timeout=httpx2.Timeout(self.config.timeout_s, connect=self.config.connect_timeout_s),
            )
            # Retries are ours (backoff with jitter, stable codes), so the SDK's are off.
            client = openai.AsyncOpenAI(
                base_url=self.config.base_url,
                api_key=self.config.api_key,
                http_client=http,
                max_retries=0,
                timeout=self.config.timeout_s,
            )
            shards.append(_Shard(client))
        return shards, asyncio.Semaphore(bound)

    def close(self) -> None:
        async def close_all() -> None:
            for shard in self._shards:
                await shard.client.close()
            if self._endpoint is not None:
                await self._endpoint.close()

        asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)

    # --- the Recognizer protocol ---------------------------------------------------------------

    def recognize(
        self, image: np.ndarray, regions: Sequence[LayoutBox], *, cancelled: Callable[[], bool] | None = None
    ) -> Recognition:
        if self.profile["mode"] == "page":
            return self._recognize_page(image, regions, cancelled)
        calls = []
        for i, box in enumerate(regions):
            # The layout model's task wins over our label's: a PP-DocLayoutV3 "image" or "header"
            # is a figure or header here, but its task (skip / abandon) says not to read it.
            task = box.task or profiles.TASK_OF_LABEL.get(box.label)
            prompt = self.profile["prompts"].get(task) if task not in NOT_READ_TASKS else None
            if prompt is None:
                continue  # a task this model was not trained for, or one not to be read at all
            crop = _crop(image, box.bbox, self.config.crop_padding)
            if crop is None:
                continue
            calls.append(_Call(i, task, prompt, self._data_uri(crop)))
        answers = self._run(calls, cancelled)
        self._raise_if_not_read(answers)
        texts = [RegionText("", flags=("not-sent",)) for _ in regions]
        for call, answer in zip(calls, answers, strict=True):
            texts[call.index] = self._region_text(call.task, answer)
        self._raise_if_all_transient(answers)
        return Recognition(texts=texts)

    def _recognize_page(
        self, image: np.ndarray, regions: Sequence[LayoutBox], cancelled: Callable[[], bool] | None
    ) -> Recognition:
        """One-stage: the whole page in one request; grounded blocks become regions (``extra``)."""
        call = _Call(-1, "page", self.profile["page_prompt"], self._data_uri(image))
        (answer,) = self._run([call], cancelled)
        self._raise_if_not_read([answer])
        self._raise_if_all_transient([answer])
        if answer.error:
            raise EngineError(answer.error[0], answer.error[1], permanent=True)
        height, width = image.shape[:2]
        text, cut = vlm_output.cut_loop(answer.text, truncated=answer.finish_reason == "length")
        flags = (vlm_output.LOOP_CUT,) if cut else ()
        blocks = vlm_output.parse_grounding(
            text, width=width, height=height, coord_scale=self.profile["grounding"]["coord_scale"]
        )
        extra = []
        for rank, block in enumerate(blocks):
            label = profiles.GROUNDING_LABELS.get(block.label.lower(), "text")
            cleaned, more = vlm_output.clean(
                block.text, task=profiles.TASK_OF_LABEL.get(label, "text"), finish_reason=None
            )
            # The model writes the page in reading order: keep it.
            extra.append(
                (
                    LayoutBox(label=label, bbox=block.bbox, score=1.0, order=rank),
                    # One request read the whole page: its GPU time is counted once, on the first block.
                    RegionText(
                        cleaned,
                        flags=flags + tuple(more),
                        latency_ms=answer.latency_ms,
                        gpu_ms=answer.gpu_ms if rank == 0 else 0,
                    ),
                )
            )
        if not blocks and text.strip():
            # No grounding markers: keep the text as one page-sized block rather than lose it.
            cleaned, more = vlm_output.clean(text, task="text", finish_reason=None)
            extra.append(
                (
                    LayoutBox("text", (0.0, 0.0, float(width), float(height)), score=0.0),
                    RegionText(
                        cleaned,
                        flags=flags + ("no-grounding", *more),
                        latency_ms=answer.latency_ms,
                        gpu_ms=answer.gpu_ms,
                    ),
                )
            )
        # A layout pass that ran anyway is superseded by the model's own regions.
        texts = [RegionText("", flags=("superseded",)) for _ in regions]
        return Recognition(texts=texts, extra=extra)

    # --- dispatch --------------------------------------------------------------------------------

    def _run(self, calls: list[_Call], cancelled: Callable[[], bool] | None) -> list[_Answer]:
        """Send the page's calls through the shared loop; poll ``cancelled`` from this thread
        (it touches the database, which belongs to the caller's thread, not the loop's)."""
        if not calls:
            return []
        future = asyncio.run_coroutine_threadsafe(self._gather(calls), self._loop)
        while True:
            try:
                return future.result(timeout=self.config.cancel_poll_s if cancelled else None)
            except concurrent.futures.TimeoutError:
                if cancelled is not None and cancelled():
                    future.cancel()  # cancels the tasks; their HTTP connections are closed
                    raise EngineError(
                        ErrorCode.JOB_CANCELLED, "the job was cancelled; in-flight requests aborted", permanent=True
                    ) from None

    async def _gather(self, calls: list[_Call]) -> list[_Answer]:
        return list(await asyncio.gather(*(self._one(call) for call in calls)))

    async def _one(self, call: _Call) -> _Answer:
        import openai

        cfg = self.config
        last: tuple[str, str] = (ErrorCode.VLLM_UNAVAILABLE, "no attempt made")
        failures = 0  # what counts against ``retries``: not overload
        overloads = 0
        busy_since: float | None = None
        while True:
            try:
                async with self._slots:
                    return await self._with_endpoint_slot(call, busy_since)
            except Drained:
                return _Answer(error=(ErrorCode.WORKER_DRAINING, "the worker is stopping"), handback=True)
            except _Overloaded as exc:
                now = time.monotonic()
                busy_since = busy_since or now
                if now - busy_since >= cfg.overload_deadline_s:
                    return _Answer(
                        error=(ErrorCode.VLLM_OVERLOADED, f"{exc} for {cfg.overload_deadline_s:.0f}s"),
                    )
                overloads += 1
                wait = backoff_s(overloads, cfg.backoff_s, cfg.backoff_max_s) if exc.pause else 0.0
                if exc.retry_after is not None:
                    wait = min(max(wait, exc.retry_after), cfg.backoff_max_s)
            except _Retryable as exc:
                last = (exc.code, str(exc))
                failures += 1
                if failures > cfg.retries:
                    return _Answer(error=(last[0], f"{last[1]} (after {failures} attempts)"), transient=True)
                wait = backoff_s(failures, cfg.backoff_s, cfg.backoff_max_s)
            except openai.APIStatusError as exc:
                # 4xx other than 429: the request itself is wrong (image too large, bad model
                # name); the same bytes will fail again.
                return _Answer(error=(ErrorCode.VLLM_BAD_REQUEST, f"HTTP {exc.status_code}: {_short(exc)}"))
            if not await self._pause(wait):
                return _Answer(error=(ErrorCode.WORKER_DRAINING, "the worker is stopping"), handback=True)

    async def _with_endpoint_slot(self, call: _Call, busy_since: float | None) -> _Answer:
        if self.config.stopping():
            raise Drained
        if self._endpoint is None:
            return await self._attempt(call)
        # A short wait per round: the overload deadline, counted by the caller, bounds the total.
        try:
            token = await self._endpoint.acquire(
                wait_s=min(5.0, self.config.overload_deadline_s), stopping=self.config.stopping
            )
        except NoSlot as exc:
            raise _Overloaded(ErrorCode.VLLM_OVERLOADED, str(exc), pause=False) from exc
        except OSError as exc:  # Redis unreachable: the cap cannot be counted; wait, as for a busy server
            raise _Overloaded(ErrorCode.VLLM_OVERLOADED, f"in-flight cap unavailable: {exc}") from exc
        try:
            return await self._attempt(call)
        finally:
            await asyncio.shield(self._endpoint.release(token))

    async def _pause(self, seconds: float) -> bool:
        """Sleep, waking early (False) when the worker starts stopping."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            if self.config.stopping():
                return False
            await asyncio.sleep(min(left, 0.25))
        return not self.config.stopping()

    async def _attempt(self, call: _Call) -> _Answer:
        import httpx2
        import openai

        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        sharing_at_start = self.in_flight
        sharing_at_end = 1
        started = time.perf_counter()
        try:
            response = await asyncio.wait_for(self._request(call), timeout=self.config.timeout_s)
        except (TimeoutError, openai.APITimeoutError) as exc:
            raise _Retryable(ErrorCode.VLLM_TIMEOUT, f"no answer within {self.config.timeout_s}s") from exc
        except openai.APIConnectionError as exc:
            if isinstance(exc.__cause__, httpx2.ConnectError):
                # Nothing listens (restarting, rescheduled, scaled to zero): nothing was sent.
                raise _Overloaded(ErrorCode.VLLM_UNAVAILABLE, f"cannot reach {self.config.base_url}: {exc}") from exc
            raise _Retryable(ErrorCode.VLLM_UNAVAILABLE, f"cannot reach {self.config.base_url}: {exc}") from exc
        except openai.APIStatusError as exc:
            if exc.status_code in (429, 503):
                raise _Overloaded(
                    ErrorCode.VLLM_RATE_LIMITED, f"HTTP {exc.status_code}", _retry_after(exc.response)
                ) from exc
            if exc.status_code >= 500:
                raise _Retryable(ErrorCode.VLLM_SERVER_ERROR, f"HTTP {exc.status_code}") from exc
            raise
        finally:
            sharing_at_end = self.in_flight
            self.in_flight -= 1
        try:
            choice = response.json()["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise _Retryable(ErrorCode.VLLM_BAD_RESPONSE, f"unreadable completion: {exc}") from exc
        latency_ms = int((time.perf_counter() - started) * 1000)
        sharing = max(1.0, (sharing_at_start + sharing_at_end) / 2)
        return _Answer(
            text=text,
            finish_reason=choice.get("finish_reason"),
            latency_ms=latency_ms,
            gpu_ms=int(latency_ms / sharing),
        )

    async def _request(self, call: _Call) -> httpx2.Response:
        """POST /chat/completions through the SDK's client (its auth, errors, status codes)
        with a plain dict body and the raw response: the SDK's typed ``create`` walks the
        whole payload to transform it and builds pydantic models of the answer, which was
        measured at about half the dispatcher's CPU per region."""
        import httpx2

        body = {
            "model": self.model,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": call.image_url}},
                        {"type": "text", "text": call.prompt},
                    ],
                }
            ],
            "temperature": 0.0,
            "max_tokens": self.max_tokens,
            # vLLM's own parameters (skip_special_tokens, repetition_penalty, vllm_xargs).
            **self.profile.get("sampling", {}),
        }
        shard = min(self._shards, key=lambda s: s.busy)
        shard.busy += 1
        try:
            return await shard.client.post("/chat/completions", cast_to=httpx2.Response, body=body)
        finally:
            shard.busy -= 1

    # --- helpers ---------------------------------------------------------------------------------

    def _region_text(self, task: str, answer: _Answer) -> RegionText:
        if answer.error:
            return RegionText("", flags=("vlm-failed",), latency_ms=answer.latency_ms or None, error=answer.error)
        text, flags = vlm_output.clean(answer.text, task=task, finish_reason=answer.finish_reason)
        grid = tables.parse_markup(text) if task == "table" and "table-invalid" not in flags else None
        return RegionText(
            text,
            flags=tuple(flags),
            latency_ms=answer.latency_ms,
            gpu_ms=answer.gpu_ms,
            table=tables.to_dict(grid) if grid else None,
        )

    def _raise_if_not_read(self, answers: Sequence[_Answer]) -> None:
        """The worker is stopping: hand the page back whole (its regions read so far are read
        again by the next worker; keeping half a page would need a partial write). A page whose
        every region waited out the overload deadline fails with ``vllm:overloaded``."""
        if any(a.handback for a in answers):
            raise EngineError(ErrorCode.WORKER_DRAINING, "the worker is stopping; page handed back", permanent=False)
        if answers and all(a.error and a.error[0] == ErrorCode.VLLM_OVERLOADED for a in answers):
            raise EngineError(ErrorCode.VLLM_OVERLOADED, answers[0].error[1], permanent=True)

    def _raise_if_all_transient(self, answers: Sequence[_Answer]) -> None:
        """Every region failing transiently means the server is down or drowning: retry the page
        later (the task's backoff) instead of storing a page of failed regions."""
        if answers and all(a.transient for a in answers):
            code, message = answers[0].error or (ErrorCode.VLLM_UNAVAILABLE, "")
            raise EngineError(code, message, permanent=False)

    def _data_uri(self, image: np.ndarray) -> str:
        image = _fit(image, self.profile["max_image_side"])
        fmt = self.profile["image_format"]
        ext, params, mime = {
            # RLE at level 1: scans are long runs of paper, which RLE encodes faster and smaller
            # than the default strategy.
            "png": (
                ".png",
                [cv2.IMWRITE_PNG_COMPRESSION, 1, cv2.IMWRITE_PNG_STRATEGY, cv2.IMWRITE_PNG_STRATEGY_RLE],
                "image/png",
            ),
            "jpeg": (".jpg", [cv2.IMWRITE_JPEG_QUALITY, 92], "image/jpeg"),
        }[fmt]
        if image.ndim == 3 and _is_gray(image):
            # Most scans are gray in three channels: one channel is a third of the work and of the
            # bytes; the server's processor expands it back to RGB.
            image = np.ascontiguousarray(image[:, :, 0])
        bgr = cv2.cvtColor(image, cv2.COLOR_RGB2BGR) if image.ndim == 3 else image
        ok, buf = cv2.imencode(ext, bgr, params)
        if not ok:
            raise EngineError(ErrorCode.VLLM_ENCODE, f"could not encode a crop as {fmt}", permanent=True)
        return f"data:{mime};base64,{base64.b64encode(buf.tobytes()).decode()}"


def _crop(image: np.ndarray, bbox: tuple[float, float, float, float], pad: int) -> np.ndarray | None:
    h, w = image.shape[:2]
    x0, y0 = max(0, int(bbox[0]) - pad), max(0, int(bbox[1]) - pad)
    x1, y1 = min(w, int(round(bbox[2])) + pad), min(h, int(round(bbox[3])) + pad)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return None  # a degenerate box has nothing to read
    return image[y0:y1, x0:x1]


def _is_gray(image: np.ndarray) -> bool:
    sample = image[::7, ::7]  # a coloured crop shows it in a sparse sample; confirm on all pixels
    if not (np.array_equal(sample[..., 0], sample[..., 1]) and np.array_equal(sample[..., 1], sample[..., 2])):
        return False
    return bool(np.array_equal(image[..., 0], image[..., 1]) and np.array_equal(image[..., 1], image[..., 2]))


def _fit(image: np.ndarray, max_side: int) -> np.ndarray:
    h, w = image.shape[:2]
    scale = max_side / max(h, w)
    if scale >= 1:
        return image
    return cv2.resize(image, (max(1, int(w * scale)), max(1, int(h * scale))), interpolation=cv2.INTER_AREA)


def _retry_after(response: httpx2.Response) -> float | None:
    """Seconds from a ``Retry-After`` header in seconds (vLLM's and most proxies' form)."""
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


def _short(exc: openai.APIStatusError) -> str:
    return str(exc.message)[:200]
