"""``paddle`` layout engine: PaddleOCR 3.x layout detection (PP-DocLayoutV3 by default).

Guarantees:
- ``paddleocr`` is imported when the engine is built, never at module import: the CPU install
  (web, cpu and ocr workers) does not need paddle (requirements/gpu.txt has it).
- Weights come from a local directory (OCR_PADDLE_MODEL_DIR, the shared volume the model
  ingestion Job fills); nothing is downloaded. A missing or empty directory is a permanent
  ``engine:unavailable`` at build time that names the setting.
- One ``predict`` call per batch of pages (``batch_size`` = OCR_PADDLE_BATCH), so the collector
  on the ``layout`` queue turns into GPU batches.
- Labels map to ours (``LABELS``) and each box carries its native label's task type
  (``LayoutBox.task``: text / table / formula / chart / skip / abandon, after GLM-OCR's
  ``label_task_mapping``); ``abandon`` boxes (page furniture the reference GLM-OCR pipeline
  drops) are kept as header/footer regions and ``skip`` boxes (images) become figures, and the
  VLM recognizer sends neither. Polygons (PP-DocLayoutV3's ``polygon_points``) are kept, and
  the model's reading order is kept even though PaddleX sets ``order`` to None on tables,
  charts, images and page furniture (see ``_with_model_order``).

The conversion (``boxes_from_result``) is a pure function over PaddleOCR's result structure,
tested here on structures shaped exactly as PaddleOCR returns them; the model itself only runs
on a GPU worker with weights (tests marked ``gpu``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ocrsite.vocabulary import ErrorCode
from workers.engines.base import EngineError, LayoutBox
from workers.engines.settings import DeploymentSettings

log = logging.getLogger(__name__)

MODELS = ("PP-DocLayoutV3", "PP-DocLayout_plus-L")

# PP-DocLayoutV3 (25 classes) and PP-DocLayout_plus-L (20 classes) labels → (our label, task).
# Task types follow GLM-OCR's label_task_mapping for PP-DocLayoutV3: what the recognizer should
# do with the region. Ours must be one of workers.engines.base.LABELS.
LABEL_MAP: dict[str, tuple[str, str]] = {
    "doc_title": ("title", "text"),
    "paragraph_title": ("title", "text"),
    "text": ("text", "text"),
    "abstract": ("text", "text"),
    "content": ("text", "text"),
    "algorithm": ("text", "text"),
    "vertical_text": ("text", "text"),
    "reference_content": ("reference", "text"),
    "seal": ("figure", "text"),
    "formula_number": ("equation", "text"),
    "figure_title": ("figure_caption", "text"),
    "vision_footnote": ("figure_caption", "text"),
    "table_title": ("table_caption", "text"),
    "chart_title": ("figure_caption", "text"),
    "figure_table_chart_title": ("figure_caption", "text"),
    "table": ("table", "table"),
    "display_formula": ("equation", "formula"),
    "inline_formula": ("equation", "formula"),
    "formula": ("equation", "formula"),
    "chart": ("figure", "chart"),
    "image": ("figure", "skip"),
    "header": ("header", "abandon"),
    "header_image": ("header", "abandon"),
    "footer": ("footer", "abandon"),
    "footer_image": ("footer", "abandon"),
    "number": ("footer", "abandon"),
    "footnote": ("footer", "abandon"),
    "aside_text": ("text", "abandon"),
    "reference": ("reference", "abandon"),
}


def task_of(native_label: str) -> str:
    return LABEL_MAP.get(native_label, ("text", "text"))[1]


@dataclass(frozen=True)
class PaddleLayoutConfig:
    model_dir: str = ""
    model: str = "PP-DocLayoutV3"
    device: str = "gpu:0"
    batch_size: int = 8
    threshold: float = 0.3
    layout_nms: bool = True

    @classmethod
    def from_settings(cls, s: DeploymentSettings) -> PaddleLayoutConfig:
        return cls(
            **s.pick(
                model_dir="OCR_PADDLE_MODEL_DIR",
                model="OCR_PADDLE_MODEL",
                device="OCR_PADDLE_DEVICE",
                batch_size="OCR_PADDLE_BATCH",
                threshold="OCR_PADDLE_THRESHOLD",
            )
        )


def boxes_from_result(result: Any) -> list[LayoutBox]:
    """One PaddleOCR layout result (``res.json`` dict, its ``"res"`` body, or the result object
    itself) → our boxes. Unknown labels become ``text`` rather than being dropped."""
    body = _body(result)
    raw = list(body.get("boxes") or [])
    boxes: list[LayoutBox] = []
    native_orders: list[int | None] = []
    for item in raw:
        native = str(item["label"])
        ours, task = LABEL_MAP.get(native, ("text", "text"))
        x0, y0, x1, y1 = (float(v) for v in list(item["coordinate"])[:4])
        if x1 <= x0 or y1 <= y0:
            continue
        order = item.get("order")
        native_orders.append(int(order) if order is not None else None)
        boxes.append(
            LayoutBox(
                label=ours,
                bbox=(round(x0, 1), round(y0, 1), round(x1, 1), round(y1, 1)),
                score=round(float(item.get("score", 1.0)), 4),
                polygon=_polygon(item.get("polygon_points")),
                task=task,
            )
        )
    return _with_model_order(boxes, native_orders)


def _with_model_order(boxes: list[LayoutBox], native_orders: list[int | None]) -> list[LayoutBox]:
    """Every box gets a rank that keeps the model's order.

    PP-DocLayoutV3 predicts an order for every box and PaddleX lists the boxes sorted by it, then
    numbers only the boxes whose label is not in its ``SKIP_ORDER_LABELS`` (tables, charts,
    images, headers, footers, footnotes, asides, figure titles) and sets ``order`` to None on the
    rest (``update_order_index`` in PaddleX 3.7's ``layout_analysis/processors.py``). So boxes
    with a number keep exactly that order, and a box without one follows the numbered box listed
    before it, which is where the model put it. A model with no order at all (PP-DocLayout_plus-L
    has no ``order`` key) leaves every box unordered for our XY-cut."""
    if all(order is None for order in native_orders):
        return boxes
    keys = []
    anchor = 0
    for index, order in enumerate(native_orders):
        if order is not None:
            anchor = order
            keys.append((order, 0, index))
        else:
            keys.append((anchor, 1, index))
    ranked = sorted(range(len(boxes)), key=keys.__getitem__)
    rank_of = {index: rank for rank, index in enumerate(ranked)}
    return [replace(box, order=rank_of[index]) for index, box in enumerate(boxes)]


def _body(result: Any) -> Mapping[str, Any]:
    if not isinstance(result, Mapping):
        result = getattr(result, "json", result)  # PaddleOCR's result object exposes .json
    if isinstance(result, Mapping) and "res" in result and isinstance(result["res"], Mapping):
        return result["res"]
    if isinstance(result, Mapping):
        return result
    raise EngineError(ErrorCode.LAYOUT_BAD_RESULT, f"unexpected PaddleOCR result type {type(result).__name__}")


def _polygon(points: Any) -> tuple[tuple[float, float], ...] | None:
    if points is None:
        return None
    pts = np.asarray(points, dtype=float).reshape(-1, 2)
    if len(pts) < 3:
        return None
    return tuple((round(float(x), 1), round(float(y), 1)) for x, y in pts)


class PaddleLayoutEngine:
    """PaddleOCR ``LayoutDetection`` over a local model directory; batches pages in one call."""

    def __init__(self, config: PaddleLayoutConfig) -> None:
        if config.model not in MODELS:
            raise EngineError(
                ErrorCode.ENGINE_MISCONFIGURED,
                f"OCR_PADDLE_MODEL={config.model!r}; choose one of {', '.join(MODELS)}",
                permanent=True,
            )
        model_dir = Path(config.model_dir) if config.model_dir else None
        if model_dir is None or not model_dir.is_dir() or not any(model_dir.iterdir()):
            raise EngineError(
                ErrorCode.ENGINE_UNAVAILABLE,
                f"no {config.model} weights: OCR_PADDLE_MODEL_DIR={config.model_dir!r} is not a non-empty directory "
                "(point it at the shared model volume, or use OCR_LAYOUT_ENGINE=cpu)",
                permanent=True,
            )
        try:
            from paddleocr import LayoutDetection  # GPU image only: requirements/gpu.txt
        except ImportError as exc:
            raise EngineError(
                ErrorCode.ENGINE_UNAVAILABLE,
                f"paddleocr is not installed ({exc}); install requirements/gpu.txt or use OCR_LAYOUT_ENGINE=cpu",
                permanent=True,
            ) from exc
        self.config = config
        self.name = f"paddle:{config.model}"
        self._model = LayoutDetection(model_name=config.model, model_dir=str(model_dir), device=config.device)

    def detect(self, images: Sequence[np.ndarray]) -> list[list[LayoutBox]]:
        if not images:
            return []
        # PaddleOCR reads arrays as OpenCV does (BGR); ours are RGB.
        batch = [np.ascontiguousarray(img[:, :, ::-1]) if img.ndim == 3 else img for img in images]
        try:
            results = list(
                self._model.predict(
                    batch,
                    batch_size=self.config.batch_size,
                    threshold=self.config.threshold,
                    layout_nms=self.config.layout_nms,
                )
            )
        except MemoryError as exc:
            raise EngineError(ErrorCode.LAYOUT_OOM, "out of memory in layout detection", permanent=False) from exc
        except RuntimeError as exc:  # CUDA errors surface as RuntimeError; a retry may land elsewhere
            raise EngineError(ErrorCode.LAYOUT_RUNTIME, f"PaddleOCR layout failed: {exc}", permanent=False) from exc
        if len(results) != len(images):
            raise EngineError(ErrorCode.LAYOUT_BAD_RESULT, f"{len(results)} results for {len(images)} pages")
        return [boxes_from_result(r) for r in results]
