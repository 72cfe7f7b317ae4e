"""Build engines by name from a frozen config, once per worker process.

Which engines a job uses is decided by ``for_job`` from the job's ``engine`` (cpu | gpu |
vlm-page) and the deployment's settings; the engines are then built lazily and cached, so a
worker that never sees a GPU job never imports paddle nor opens a connection pool to vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

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

LAYOUTS = ("cpu", "paddle", "none")
RECOGNIZERS = ("cpu", "vllm", "vllm-page")


@dataclass(frozen=True)
class EngineSettings:
    layout: str = "cpu"  # cpu | paddle | none (one-stage page models need no layout)
    recognizer: str = "cpu"  # cpu | vllm | vllm-page
    cpu_layout: CpuLayoutConfig = field(default_factory=CpuLayoutConfig)
    cpu_recognizer: CpuRecognizerConfig = field(default_factory=CpuRecognizerConfig)
    paddle: PaddleLayoutConfig = field(default_factory=PaddleLayoutConfig)
    vllm: VllmConfig = field(default_factory=VllmConfig)
    vllm_page_profile: str = "deepseek-ocr"
    vllm_page_base_url: str = ""  # empty: the region server's (VLLM_BASE_URL)
    vllm_page_model: str = ""  # empty: the page profile's model
    # With recognizer "vllm": only these labels go to the VLM, the rest to the CPU pass.
    vllm_labels: tuple[str, ...] = ()

    def for_job(self, engine: str) -> EngineSettings:
        """The engines for a job's ``engine`` choice.

        - ``cpu``: the deployment's OCR_LAYOUT_ENGINE / OCR_RECOGNIZER (CPU ones by default).
        - ``gpu``: PaddleOCR layout + vLLM region recognition (mixed with CPU lines when
          OCR_VLLM_LABELS is set).
        - ``vlm-page``: no layout; the one-stage page profile reads the whole page.
        """
        if engine == "gpu":
            return replace(self, layout="paddle", recognizer="vllm")
        if engine == "vlm-page":
            return replace(self, layout="none", recognizer="vllm-page")
        if engine == "cpu":
            return self
        raise EngineError("engine:unknown", f"unknown engine {engine!r}; use cpu, gpu or vlm-page", permanent=True)


@lru_cache(maxsize=8)
def layout_engine(config: EngineSettings) -> LayoutEngine:
    if config.layout == "cpu":
        return RapidLayoutEngine(config.cpu_layout)
    if config.layout == "paddle":
        return PaddleLayoutEngine(config.paddle)
    raise EngineError(
        "engine:unavailable",
        f"layout engine {config.layout!r} is not available; set OCR_LAYOUT_ENGINE to one of cpu, paddle",
        permanent=True,
    )


@lru_cache(maxsize=8)
def recognizer(config: EngineSettings) -> Recognizer:
    if config.recognizer == "cpu":
        return _cpu_recognizer(config.cpu_recognizer)
    if config.recognizer == "vllm":
        vlm = _vllm(config.vllm)
        if config.vllm_labels:
            return MixedRecognizer(_cpu_recognizer(config.cpu_recognizer), vlm, config.vllm_labels)
        return vlm
    if config.recognizer == "vllm-page":
        return _vllm(
            replace(
                config.vllm,
                profile=config.vllm_page_profile,
                model=config.vllm_page_model,
                base_url=config.vllm_page_base_url or config.vllm.base_url,
            )
        )
    raise EngineError(
        "engine:unavailable",
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
