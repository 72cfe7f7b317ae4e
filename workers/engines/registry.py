"""Which engines a job runs, and building them from frozen configs, once per worker process.

``EngineSettings`` is the deployment's engine choice (a layout part and a recogniser part) and
its settings, frozen (``workers.engines.settings.DeploymentSettings``, built from Django settings
by ``workers.engine_setup``; nothing here imports Django). ``for_job`` resolves a job's ``engine``
choice through the catalogue (``ocrsite.catalogue``) to the layout and recogniser parts it runs;
each part is built by the adapter the catalogue names, lazily and once per distinct config, and
each adapter builds its engine's config from the settings with that engine's own
``from_settings``: nothing here knows an engine's options.

The built-in parts' adapters are the ``build_*`` functions below rather than functions in each
engine's module: they share instances across parts (the CPU recogniser inside the mixed one, one
vLLM client per server config), and those caches live here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache

from ocrsite import catalogue
from ocrsite.vocabulary import ErrorCode
from workers.engines import mixed
from workers.engines.base import EngineError, LayoutEngine, Recognizer
from workers.engines.cpu import CpuRecognizerConfig, RapidLayoutEngine, RapidOcrRecognizer
from workers.engines.cpu import settings as cpu_settings
from workers.engines.paddle import PaddleLayoutConfig, PaddleLayoutEngine
from workers.engines.settings import DeploymentSettings
from workers.engines.vllm import VllmConfig, VllmRecognizer


@dataclass(frozen=True)
class EngineSettings:
    # Part names from the catalogue. None: the job's pages skip the layout pass (a one-stage page
    # model finds its own regions).
    layout: str | None = "cpu"
    recognizer: str = "cpu"
    # What each part's adapter builds its engine's config from (its ``from_settings``).
    settings: DeploymentSettings = field(default_factory=DeploymentSettings)

    @property
    def needs_layout(self) -> bool:
        return self.layout is not None

    def for_job(self, engine: str) -> EngineSettings:
        """The parts a job's ``engine`` choice runs (``ocrsite.catalogue.JOB_ENGINES``): the
        deployment's own where the catalogue says DEPLOYMENT, none for layout where a one-stage
        page recogniser reads the page."""
        choice = catalogue.JOB_ENGINES.get(engine)
        if choice is None:
            raise EngineError(
                ErrorCode.ENGINE_UNKNOWN,
                f"unknown engine {engine!r}; use {', '.join(catalogue.JOB_ENGINES)}",
                permanent=True,
            )
        recognizer = self.recognizer if choice.recognizer == catalogue.DEPLOYMENT else choice.recognizer
        layout = self.layout if choice.layout == catalogue.DEPLOYMENT else choice.layout
        part = catalogue.RECOGNIZERS.get(recognizer)
        if part is not None and not part.needs_layout:
            layout = None
        return replace(self, layout=layout, recognizer=recognizer)


def layout_engine(config: EngineSettings) -> LayoutEngine:
    part = catalogue.LAYOUTS.get(config.layout or "")
    if part is None:
        raise EngineError(
            ErrorCode.ENGINE_UNAVAILABLE,
            f"layout engine {config.layout!r} is not available; set OCR_LAYOUT_ENGINE to one of "
            f"{', '.join(catalogue.layout_choices())}",
            permanent=True,
        )
    return _built(part.adapter, config)


def recognizer(config: EngineSettings) -> Recognizer:
    part = catalogue.RECOGNIZERS.get(config.recognizer)
    if part is None:
        raise EngineError(
            ErrorCode.ENGINE_UNAVAILABLE,
            f"recognizer {config.recognizer!r} is not available; set OCR_RECOGNIZER to one of "
            f"{', '.join(catalogue.recognizer_choices())}",
            permanent=True,
        )
    return _built(part.adapter, config)


@lru_cache(maxsize=16)
def _built(adapter: str, config: EngineSettings) -> LayoutEngine | Recognizer:
    return _adapter(adapter)(config)


def _adapter(path: str) -> Callable[[EngineSettings], LayoutEngine | Recognizer]:
    module, _, function = path.partition(":")
    return getattr(importlib.import_module(module), function)


# --- the built-in parts (ocrsite.catalogue names these) ------------------------------------------


def build_rapid_layout(config: EngineSettings) -> LayoutEngine:
    return RapidLayoutEngine(cpu_settings.layout_from_settings(config.settings))


def build_paddle_layout(config: EngineSettings) -> LayoutEngine:
    return PaddleLayoutEngine(PaddleLayoutConfig.from_settings(config.settings))


def build_rapidocr(config: EngineSettings) -> Recognizer:
    return _cpu_recognizer(cpu_settings.recognizer_from_settings(config.settings))


def build_region_vlm(config: EngineSettings) -> Recognizer:
    vlm = _vllm(VllmConfig.from_settings(config.settings))
    # With OCR_VLLM_LABELS only those labels go to the VLM, the rest to the CPU pass.
    if labels := mixed.labels_from_settings(config.settings):
        cpu = _cpu_recognizer(cpu_settings.recognizer_from_settings(config.settings))
        return mixed.MixedRecognizer(cpu, vlm, labels)
    return vlm


def build_page_vlm(config: EngineSettings) -> Recognizer:
    return _vllm(VllmConfig.page_from_settings(config.settings))


# One instance per distinct config: a vLLM client holds a connection pool and an event loop, and
# the in-flight bound is per process only if every caller shares it.
@lru_cache(maxsize=4)
def _vllm(config: VllmConfig) -> VllmRecognizer:
    return VllmRecognizer(config)


@lru_cache(maxsize=2)
def _cpu_recognizer(config: CpuRecognizerConfig) -> RapidOcrRecognizer:
    return RapidOcrRecognizer(config)
