"""The CPU engines' configs from the deployment's settings (``from_settings`` for this package).

A module of its own beside ``config``: the frozen configs and profiles stay as they are, and what
the deployment's settings mean for them is read here, once per process.
"""

from __future__ import annotations

from ocrsite.vocabulary import CpuModel, CpuRuntime
from workers.engines.cpu.config import CpuLayoutConfig, CpuRecognizerConfig, profile_config
from workers.engines.settings import DeploymentSettings


def layout_from_settings(s: DeploymentSettings) -> CpuLayoutConfig:
    return CpuLayoutConfig(threads=s.threads, **s.pick(model_cache_dir="OCR_MODEL_CACHE_DIR"))


def recognizer_from_settings(s: DeploymentSettings) -> CpuRecognizerConfig:
    """OCR_CPU_PROFILE's config with the deployment's explicit overrides (a setting left at its
    "unset" value, 0 / -1 / empty, keeps the profile's)."""
    optional = {
        "rec_batch": s.get("OCR_REC_BATCH", 0) if s.get("OCR_REC_BATCH", 0) > 0 else None,
        "runtime": CpuRuntime(s.get("OCR_CPU_RUNTIME")) if s.get("OCR_CPU_RUNTIME") else None,
        "det_probe_model": CpuModel(s.get("OCR_CPU_PROBE_MODEL")) if s.get("OCR_CPU_PROBE_MODEL") else None,
        "rec_model": CpuModel(s.get("OCR_CPU_REC_MODEL")) if s.get("OCR_CPU_REC_MODEL") else None,
        "reread_below": s.get("OCR_CPU_REREAD_BELOW", -1) if s.get("OCR_CPU_REREAD_BELOW", -1) >= 0 else None,
    }
    return profile_config(
        s.get("OCR_CPU_PROFILE", "fast"),
        threads=s.threads,
        det_memory_patterns=not s.memory_first,
        **{field: value for field, value in optional.items() if value is not None},
        **s.pick(
            det_max_side="OCR_DET_MAX_SIDE",
            det_limit_side="OCR_DET_LIMIT_SIDE",
            det_limit_type="OCR_DET_LIMIT_TYPE",
            model_cache_dir="OCR_MODEL_CACHE_DIR",
            other_scripts="OCR_OTHER_SCRIPTS",
            tessdata_dir="OCR_TESSDATA_DIR",
        ),
    )
