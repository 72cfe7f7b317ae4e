"""``vllm`` recognizer: region crops (or whole pages) to a VLM behind vLLM's OpenAI-compatible API.

Guarantees:
- At most ``max_in_flight`` requests are open per worker process, however many threads call
  ``recognize`` at once (one event loop and one semaphore per process), and the HTTP pool holds
  exactly that many connections, so no request waits for a socket and none are opened beyond it.
  Keep the bound near vLLM's ``max-num-seqs`` so continuous batching stays full.
- Connection errors, timeouts, 429 and 5xx are retried with exponential backoff and full jitter,
  each attempt under a total deadline (a slow trickle of bytes cannot hold a slot forever).
  A region that exhausts its budget fails alone with a stable code (``vllm:timeout``,
  ``vllm:unavailable``, ``vllm:rate-limited``, ``vllm:server-error``, ``vllm:bad-request``);
  when every region of the page failed transiently the page raises a retryable EngineError.
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
from dataclasses import dataclass
from typing import TYPE_CHECKING

import cv2
import numpy as np

from ocrsite.backoff import Backoff
from ocrsite.vocabulary import ErrorCode
from workers.content import tables
from workers.engines import profiles, vlm_output
from workers.engines.base import NOT_READ_TASKS, EngineError, LayoutBox, Recognition, RegionText

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
    error: tuple[str, str] | None = None
    transient: bool = False


@dataclass
class _Shard:
    client: openai.AsyncOpenAI
    busy: int = 0


SHARD = 8  # connections per HTTP pool


class _Retryable(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = str(code)  # a plain string from here on: it is stored, logged and serialized


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
        # Full jitter: spreads a burst of retries so they do not land together.
        self._backoff = Backoff(config.backoff_s, config.backoff_max_s)
        self.in_flight = 0
        self.peak_in_flight = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-dispatch", daemon=True)
        self._thread.start()
        self._shards, self._slots = asyncio.run_coroutine_threadsafe(self._setup(), self._loop).result()

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
        shards = []
        for _ in range(count):
            http = httpx2.AsyncClient(
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
                    RegionText(cleaned, flags=flags + tuple(more), latency_ms=answer.latency_ms),
                )
            )
        if not blocks and text.strip():
            # No grounding markers: keep the text as one page-sized block rather than lose it.
            cleaned, more = vlm_output.clean(text, task="text", finish_reason=None)
            extra.append(
                (
                    LayoutBox("text", (0.0, 0.0, float(width), float(height)), score=0.0),
                    RegionText(cleaned, flags=flags + ("no-grounding", *more), latency_ms=answer.latency_ms),
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
        for attempt in range(cfg.retries + 1):
            if attempt:
                await asyncio.sleep(self._backoff(attempt))
            try:
                async with self._slots:
                    return await self._attempt(call)
            except _Retryable as exc:
                last = (exc.code, str(exc))
            except openai.APIStatusError as exc:
                # 4xx other than 429: the request itself is wrong (image too large, bad model
                # name); the same bytes will fail again.
                return _Answer(error=(ErrorCode.VLLM_BAD_REQUEST, f"HTTP {exc.status_code}: {_short(exc)}"))
        return _Answer(error=(last[0], f"{last[1]} (after {cfg.retries + 1} attempts)"), transient=True)

    async def _attempt(self, call: _Call) -> _Answer:
        import openai

        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        started = time.perf_counter()
        try:
            response = await asyncio.wait_for(self._request(call), timeout=self.config.timeout_s)
        except (TimeoutError, openai.APITimeoutError) as exc:
            raise _Retryable(ErrorCode.VLLM_TIMEOUT, f"no answer within {self.config.timeout_s}s") from exc
        except openai.APIConnectionError as exc:
            raise _Retryable(ErrorCode.VLLM_UNAVAILABLE, f"cannot reach {self.config.base_url}: {exc}") from exc
        except openai.RateLimitError as exc:
            raise _Retryable(ErrorCode.VLLM_RATE_LIMITED, "HTTP 429") from exc
        except openai.APIStatusError as exc:
            if exc.status_code >= 500:
                raise _Retryable(ErrorCode.VLLM_SERVER_ERROR, f"HTTP {exc.status_code}") from exc
            raise
        finally:
            self.in_flight -= 1
        try:
            choice = response.json()["choices"][0]
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise _Retryable(ErrorCode.VLLM_BAD_RESPONSE, f"unreadable completion: {exc}") from exc
        return _Answer(
            text=text, finish_reason=choice.get("finish_reason"), latency_ms=int((time.perf_counter() - started) * 1000)
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
            text, flags=tuple(flags), latency_ms=answer.latency_ms, table=tables.to_dict(grid) if grid else None
        )

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


def _short(exc: openai.APIStatusError) -> str:
    return str(exc.message)[:200]
