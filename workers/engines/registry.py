"""Build engines by name from a frozen config, once per worker process."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from workers.engines.base import EngineError, LayoutEngine, Recognizer
from workers.engines.cpu import (
    CpuLayoutConfig,
    CpuRecognizerConfig,
    RapidLayoutEngine,
    RapidOcrRecognizer,
)


@dataclass(frozen=True)
class EngineSettings:
    layout: str = "cpu"
    recognizer: str = "cpu"
    cpu_layout: CpuLayoutConfig = field(default_factory=CpuLayoutConfig)
    cpu_recognizer: CpuRecognizerConfig = field(default_factory=CpuRecognizerConfig)


@lru_cache(maxsize=4)
def layout_engine(config: EngineSettings) -> LayoutEngine:
    if config.layout == "cpu":
        return RapidLayoutEngine(config.cpu_layout)
    raise EngineError(
        "engine:unavailable",
        f"layout engine {config.layout!r} is not available; set OCR_LAYOUT_ENGINE=cpu",
        permanent=True,
    )


@lru_cache(maxsize=4)
def recognizer(config: EngineSettings) -> Recognizer:
    if config.recognizer == "cpu":
        return RapidOcrRecognizer(config.cpu_recognizer)
    raise EngineError(
        "engine:unavailable",
        f"recognizer {config.recognizer!r} is not available; set OCR_RECOGNIZER=cpu",
        permanent=True,
    )
