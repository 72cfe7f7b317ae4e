"""Text-line detection with rapidocr's DB detector, its input size chosen per call.

The detector's session and post-processing are rapidocr's; the resize is ours, per call, so one
loaded model serves both the capped probe and the full-size pass without any state changing
between pages (a thread pool may share the engine).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workers.engines.cpu.config import CpuRecognizerConfig

PROBE, FULL = "probe", "full"
# A page detected at full size by the probe's model (``table_probe_model``): its print is normal
# size, and the full size is there only to keep a table's cells apart.
FULL_PROBE_MODEL = "full-probe-model"


@dataclass(frozen=True)
class Detected:
    """Line quads (n × 4 × 2, clockwise from top-left) in the input's pixels, and which pass
    found them (``probe`` or ``full``)."""

    quads: np.ndarray
    detection_pass: str


# A probe box more than this many times the lower-quartile box height holds more than one line: at
# a reduced size the tiny detector merges the lines of small print into paragraph blocks (on a
# 6-pt page it gave boxes 35 and 64 px tall among 13-px lines), and a block read as one line is
# garbage. Headings run 1.3-2x body text, so a few tall boxes are allowed.
MERGED_LINE_FACTOR = 2.0
MERGED_SHARE_MAX = 0.1


# A page whose probe finds no text at all is detected again at full size only when it holds at
# least this share of ink (ink_share): small print the probe cannot see covers several percent of
# a page, while a blank page, a stamp or a signature covers well under one; those end at the probe.
FULL_PASS_MIN_INK = 0.01


class TextDetection:
    """Two-pass detection: the page with its long side capped at ``det_probe_side`` first, kept
    when the median line is at least ``det_probe_min_px`` tall there and the boxes are lines, not
    merged blocks (``probe_is_lines``); otherwise (small print, or nothing found on a page with
    ink) again at ``det_limit_side``/``det_limit_type``. ``det_probe_side`` 0: one full-size pass.

    ``detector`` and ``probe_detector`` are callables building rapidocr ``TextDetector``s, each
    called once, when its pass first runs: a process whose pages all keep the probe never loads
    the full-size model (nor the probe's, if it never sees a page)."""

    def __init__(self, detector, config: CpuRecognizerConfig, probe_detector=None) -> None:
        self._make_full = detector
        self._make_probe = probe_detector
        self._built: dict[str, object] = {}
        self._probe = config.det_probe_side
        self._min_px = config.det_probe_min_px
        self._full = (config.det_limit_side, config.det_limit_type)
        self._table_probe_model = config.det_table_probe_model

    def _detector(self, which: str):
        if which == PROBE and self._make_probe is None:
            which = FULL  # the probe runs on the full-size pass's detector
        if which not in self._built:
            self._built[which] = (self._make_probe if which == PROBE else self._make_full)()
        return self._built[which]

    def load_probe(self) -> None:
        """The probe pass's detector built now rather than on the first page."""
        self._detector(PROBE)

    @property
    def session(self):
        """The full-size pass's inference session (its type says which runtime detects)."""
        return self._detector(FULL).session

    def __call__(self, image: np.ndarray, *, full: bool = False, table: bool = False) -> Detected:
        """``full``: the full-size pass's detector at full size. ``table``: the page holds a table,
        so it is detected at full size, by the probe's model where its print is normal
        (``det_table_probe_model``: ``_full_size_by_print``)."""
        if table and not full:
            if self._probe > 0 and self._table_probe_model:
                return self._full_size_by_print(image)
            full = True
        if self._probe > 0 and not full:
            quads = self._detect(self._detector(PROBE), image, self._probe, "max")
            if len(quads):
                scale = min(1.0, self._probe / max(image.shape[:2]))
                if probe_is_lines(line_heights(quads) * scale, self._min_px):
                    return Detected(quads, PROBE)
            elif ink_share(image) < FULL_PASS_MIN_INK:
                return Detected(quads, PROBE)
        return Detected(self._detect(self._detector(FULL), image, *self._full), FULL)

    def _full_size_by_print(self, image: np.ndarray) -> Detected:
        """A page that must be detected at full size (a table: at the probe's size neighbouring
        cells merge): by the probe's own, cheaper model where the probe finds clean lines of
        normal print, by the full-size pass's model where the print is small (``probe_is_lines``):
        on 6-pt print the tiny detector loses words at any size (the NICS table: F1 0.976 -> 0.946)."""
        quads = self._detect(self._detector(PROBE), image, self._probe, "max")
        scale = min(1.0, self._probe / max(image.shape[:2]))
        if len(quads) and probe_is_lines(line_heights(quads) * scale, self._min_px):
            return Detected(self._detect(self._detector(PROBE), image, *self._full), FULL_PROBE_MODEL)
        return Detected(self._detect(self._detector(FULL), image, *self._full), FULL)

    def once(self, image: np.ndarray, side: int) -> np.ndarray:
        """One pass of the probe's detector with the long side capped at ``side`` (the orientation
        check: a fixed cost, whatever the print size)."""
        return self._detect(self._detector(PROBE), image, side, "max")

    def _detect(self, det, image: np.ndarray, side: int, kind: str) -> np.ndarray:
        from rapidocr.ch_ppocr_det.utils import DetPreProcess

        pre = DetPreProcess(side, kind, det.mean, det.std)
        resized = pre.resize(image)
        if resized is None:
            return np.zeros((0, 4, 2), np.float32)
        boxes, _scores = det.postprocess_op(det.session(_normalised(resized, pre.mean, pre.std)), image.shape[:2])
        if len(boxes) == 0:
            return np.zeros((0, 4, 2), np.float32)
        return det.sorted_boxes(boxes)


def _normalised(image: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """The detector's input tensor (1 x 3 x H x W, float32) from a resized BGR page: pixels / 255,
    less ``mean``, over ``std``, per channel. rapidocr's DetPreProcess computes the same in float64
    and converts at the end: page-sized float64 temporaries (~200 MB at full size) and about twice
    the time; here each channel is scaled in float32 straight into its plane of the tensor (no
    whole-page float copy to transpose afterwards: 11 ms a full-size pass instead of 57), the
    values equal to float32 rounding (the same word F1 on every real page, bench cpu-engine)."""
    height, width = image.shape[:2]
    out = np.empty((1, 3, height, width), np.float32)
    scale = (1.0 / (255.0 * np.asarray(std))).astype(np.float32)
    shift = (np.asarray(mean) / np.asarray(std)).astype(np.float32)
    for channel in range(3):
        plane = out[0, channel]
        np.multiply(image[..., channel], scale[channel], out=plane, casting="unsafe")
        plane -= shift[channel]
    return out


def probe_is_lines(heights: np.ndarray, min_px: float) -> bool:
    """Whether boxes of these heights (probe pixels) are single lines of print large enough to
    read: median at least ``min_px``, and at most MERGED_SHARE_MAX of them taller than
    MERGED_LINE_FACTOR times the lower quartile (merged lines)."""
    if not len(heights) or float(np.median(heights)) < min_px:
        return False
    merged = heights > MERGED_LINE_FACTOR * float(np.percentile(heights, 25))
    return float(np.mean(merged)) <= MERGED_SHARE_MAX


def line_heights(quads: np.ndarray) -> np.ndarray:
    """Height of each detected quad (points clockwise from top-left): mean of its two sides."""
    q = np.asarray(quads, dtype=np.float64)
    return (np.linalg.norm(q[:, 3] - q[:, 0], axis=1) + np.linalg.norm(q[:, 2] - q[:, 1], axis=1)) / 2


# Ink: a pixel at least this far from the page's background grey (its commonest value), either way,
# so light print on a dark page counts too.
INK_CONTRAST = 64
# A page with less ink than this share is blank (is_blank): about 20 dark pixels in a million, a
# speck or two; a page number alone is several times that.
BLANK_INK_MAX = 2e-5


def ink_share(image: np.ndarray) -> float:
    """The share of the page's pixels that are ink (INK_CONTRAST from the background), read on
    every other pixel of every other row (strokes at OCR resolutions are wider than that) and
    the darkest channel, in milliseconds on a 200-dpi page."""
    sample = np.asarray(image)[::2, ::2]
    if sample.ndim == 3:
        # Channel by channel: ``min(axis=2)`` over a strided view costs ~25 ms on a 200-dpi page.
        sample = np.minimum(np.minimum(sample[..., 0], sample[..., 1]), sample[..., 2])
    if not sample.size:
        return 0.0
    counts = np.bincount(sample.astype(np.uint8, copy=False).ravel(), minlength=256)
    background = int(np.argmax(counts))
    ink = counts[: max(0, background - INK_CONTRAST + 1)].sum() + counts[background + INK_CONTRAST :].sum()
    return float(ink) / sample.size


def is_blank(image: np.ndarray) -> bool:
    """Whether the page holds no ink worth a model's time (``BLANK_INK_MAX``)."""
    return ink_share(image) < BLANK_INK_MAX
