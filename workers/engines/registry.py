"""Which engines a job runs, and building them from frozen configs, once per worker process.

``EngineSettings`` is the deployment's engine configuration (built from Django settings by
``workers.engine_setup``; nothing here imports Django). ``for_job`` resolves a job's ``engine``
choice to the layout and recognizer kinds it runs; the engines themselves are built lazily and
cached, so a worker that never sees a GPU job never imports paddle nor opens a pool to vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

from ocrsite.vocabulary import ErrorCode, JobEngine, LayoutKind, RecognizerKind
from workers.engines.base import EngineError, LayoutEngine, Recognizer
from workers.engines.cpu import (
    CpuLayoutConfig,
    CpuRecognizerConfig,
    RapidLayoutEngine,
    RapidOcrRecognizer,
)
from workers.engines.mixed import MixedRecognizer
from workers.engines.paddle import PaddleLayoutConfig, PaddleLayoutEngine
from workers.engines.vllm import VllmConfig, VllmRecognizer


@dataclass(frozen=True)
class EngineSettings:
    # None: a one-stage page model finds its own regions, so the job's pages skip the layout pass.
    layout: LayoutKind | None = LayoutKind.CPU
    recognizer: RecognizerKind = RecognizerKind.CPU
    cpu_layout: CpuLayoutConfig = field(default_factory=CpuLayoutConfig)
    cpu_recognizer: CpuRecognizerConfig = field(default_factory=CpuRecognizerConfig)
    paddle: PaddleLayoutConfig = field(default_factory=PaddleLayoutConfig)
    vllm: VllmConfig = field(default_factory=VllmConfig)
    vllm_page_profile: str = "deepseek-ocr"
    vllm_page_base_url: str = ""  # empty: the region server's (VLLM_BASE_URL)
    vllm_page_model: str = ""  # empty: the page profile's model
    # With recognizer "vllm": only these labels go to the VLM, the rest to the CPU pass.
    vllm_labels: tuple[str, ...] = ()

    @property
    def needs_layout(self) -> bool:
        return self.layout is not None

    def for_job(self, engine: str) -> EngineSettings:
        """The engines for a job's ``engine`` choice.

        - ``cpu``: the deployment's OCR_LAYOUT_ENGINE / OCR_RECOGNIZER (CPU ones by default).
        - ``gpu``: PaddleOCR layout + vLLM region recognition (mixed with CPU lines when
          OCR_VLLM_LABELS is set).
        - ``vlm-page``: no layout; the one-stage page profile reads the whole page.
        """
        try:
            choice = JobEngine(engine)
        except ValueError:
            raise EngineError(
                ErrorCode.ENGINE_UNKNOWN, f"unknown engine {engine!r}; use cpu, gpu or vlm-page", permanent=True
            ) from None
        if choice is JobEngine.GPU:
            return replace(self, layout=LayoutKind.PADDLE, recognizer=RecognizerKind.VLLM)
        if choice is JobEngine.VLM_PAGE:
            return replace(self, layout=None, recognizer=RecognizerKind.VLLM_PAGE)
        return self


@lru_cache(maxsize=8)
def layout_engine(config: EngineSettings) -> LayoutEngine:
    if config.layout == LayoutKind.CPU:
        return RapidLayoutEngine(config.cpu_layout)
    if config.layout == LayoutKind.PADDLE:
        return PaddleLayoutEngine(config.paddle)
    raise EngineError(
        ErrorCode.ENGINE_UNAVAILABLE,
        f"layout engine {config.layout!r} is not available; set OCR_LAYOUT_ENGINE to one of {', '.join(LayoutKind)}",
        permanent=True,
    )


@lru_cache(maxsize=8)
def recognizer(config: EngineSettings) -> Recognizer:
    if config.recognizer == RecognizerKind.CPU:
        return _cpu_recognizer(config.cpu_recognizer)
    if config.recognizer == RecognizerKind.VLLM:
        vlm = _vllm(config.vllm)
        if config.vllm_labels:
            return MixedRecognizer(_cpu_recognizer(config.cpu_recognizer), vlm, config.vllm_labels)
        return vlm
    if config.recognizer == RecognizerKind.VLLM_PAGE:
        return _vllm(
            replace(
                config.vllm,
                profile=config.vllm_page_profile,
                model=config.vllm_page_model,
                base_url=config.vllm_page_base_url or config.vllm.base_url,
            )
        )
    raise EngineError(
        ErrorCode.ENGINE_UNAVAILABLE,
        f"recognizer {config.recognizer!r} is not available; set OCR_RECOGNIZER to one of cpu, vllm",
        permanent=True,
    )


# One instance per distinct config: a vLLM client holds a connection pool and an event loop, and
# the in-flight bound is per process only if every caller shares it.
@lru_cache(maxsize=4)
def _vllm(config: VllmConfig) -> VllmRecognizer:
    return VllmRecognizer(config)


@lru_cache(maxsize=2)
def _cpu_recognizer(config: CpuRecognizerConfig) -> RapidOcrRecognizer:
    return RapidOcrRecognizer(config)
