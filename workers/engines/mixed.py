"""``mixed`` recognizer: CPU text lines for most regions, the VLM only for chosen labels.

Tables and formulas are where a document VLM earns its cost; running rapidocr's one full-page
pass for everything else keeps the GPU for them (OCR_VLLM_LABELS=table,equation). Lines the CPU
pass finds outside every region still come back as extra regions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from workers.engines.base import LayoutBox, Recognition, Recognizer
from workers.engines.settings import DeploymentSettings


def labels_from_settings(s: DeploymentSettings) -> tuple[str, ...]:
    """OCR_VLLM_LABELS: the labels the VLM reads (empty: every region, no mixing)."""
    return tuple(s.get("OCR_VLLM_LABELS", ()))


class MixedRecognizer:
    def __init__(self, cpu: Recognizer, vlm: Recognizer, labels: Sequence[str]) -> None:
        self.cpu = cpu
        self.vlm = vlm
        self.labels = frozenset(labels)
        self.name = f"{cpu.name}+{vlm.name}"

    def recognize(
        self, image: np.ndarray, regions: Sequence[LayoutBox], *, cancelled: Callable[[], bool] | None = None
    ) -> Recognition:
        base = self.cpu.recognize(image, regions, cancelled=cancelled)
        picked = [i for i, r in enumerate(regions) if r.label in self.labels]
        if not picked:
            return base
        better = self.vlm.recognize(image, [regions[i] for i in picked], cancelled=cancelled)
        texts = list(base.texts)
        for i, text in zip(picked, better.texts, strict=True):
            # A VLM failure keeps the CPU text (flagged) rather than losing the region; so does a
            # region the VLM did not read (a task its model has no prompt for).
            if text.error is None and "not-sent" in text.flags:
                continue
            texts[i] = (
                text
                if text.error is None
                else type(text)(
                    texts[i].text,
                    texts[i].confidence,
                    texts[i].lines,
                    (*texts[i].flags, "vlm-fallback"),
                    texts[i].latency_ms,
                )
            )
        return replace(base, texts=texts)
