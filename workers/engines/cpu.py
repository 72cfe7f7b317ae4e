"""CPU engines whose weights ship inside their wheels: no downloads, no GPU.

* ``RapidLayoutEngine``: rapid-layout's CDLA PicoDet model (ten CDLA labels).
* ``RapidOcrRecognizer``: rapidocr's PP-OCR ONNX models. One full-page detection and
  recognition pass per page; each text line is then given to the layout region holding most of
  it. Cropping each region and re-detecting was measured 2–3× slower and lost words at region
  edges. Lines that fall outside every region come back as extra regions, never dropped.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ocrsite.vocabulary import CpuProfile, CpuRuntime, ErrorCode
from workers.content import tables
from workers.engines.base import (
    LABELS,
    EngineError,
    LayoutBox,
    Recognition,
    RegionText,
    TextLine,
)
from workers.engines.geometry import best_container, iou, quad_to_box, union_box

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CpuLayoutConfig:
    conf_thresh: float = 0.5
    iou_thresh: float = 0.5
    threads: int = 0  # 0: this process's CPU budget (resolve_threads)


@dataclass(frozen=True)
class CpuRecognizerConfig:
    threads: int = 0  # intra-op threads; 0: this process's CPU budget (resolve_threads)
    det_max_side: int = 2000  # the whole page is first scaled to fit this (crops for recognition too)
    # Detection input: "min" grows the short side to det_limit_side (so a page is detected at full
    # resolution), "max" caps the long side at it. bench p2tune: "max" 960 halves a 200-dpi A4
    # page's detection (0.3 s instead of 1.7 s) at the same F1 on normal print, but the dense 6-pt
    # table page (table_nics…) fell from word F1 0.85 to 0.23, so full resolution stays the default.
    det_limit_side: int = 736
    det_limit_type: str = "min"
    rec_batch: int = 16
    # Every line crop is scaled to 48 px high and padded to at least this many pixels wide before
    # recognition (rapidocr's default, PaddleOCR's training width, is 320). A table cell or a
    # short word is a 48×60 crop, so at 320 most of its pass is padding: on the NICS table page
    # 96 cut recognition CPU 2.4× at the same word F1 (0.985), and prose lines are wider anyway.
    rec_min_width: int = 320
    use_cls: bool = False
    text_score: float = 0.5
    # rapidocr keeps at most this many detected text boxes per page (its default, 1000, silently
    # dropped the top quarter of the NICS statistics table: ~1,500 cells).
    det_max_candidates: int = 5000
    # "latin": the recognition classifier cut from 18,710 classes to the ~960 a Latin-script page
    # uses (workers.engines.cpu_models), built once from the wheel's own weights into
    # model_cache_dir. Same backbone, so the same text on Latin print at ~25% less recognition
    # CPU; "full" reads every script the model knows (CJK included).
    rec_head: str = "full"
    # Two-pass detection: >0 first detects with the long side capped at this many pixels and keeps
    # that result when the median text line is at least det_probe_min_px tall there; otherwise
    # (small print, or nothing found) it detects again at det_limit_side/det_limit_type. On the
    # dev pages normal print measures 16–48 px at 960 and the 6-pt NICS table 11 px.
    det_probe_side: int = 0
    det_probe_min_px: float = 13.0
    model_cache_dir: str = ""
    # Inference runtime for recognition, reading the same ONNX file: "onnxruntime", "openvino"
    # (Intel's CPU runtime) or "auto" (resolved by profile_config / the recognizer: see
    # auto_runtime). Detection and layout always run on onnxruntime.
    runtime: CpuRuntime = CpuRuntime.ONNXRUNTIME


# Engine profiles (OCR_CPU_PROFILE): "fast" is the Latin head, two-pass detection, batches of 4
# line crops (rapidocr sorts crops by width, so small batches pad less: on the dev pages 4 took
# ~40% less recognition CPU than 16 at the same word F1, and a lower peak memory) padded to 96 px
# rather than 320 (short crops: table cells, numbers), recognised on the runtime that is cheaper on
# this CPU; "accurate" is every script at full detection resolution on onnxruntime, as before.
# bench p2 measures both.
CPU_PROFILES: dict[CpuProfile, dict] = {
    CpuProfile.FAST: {
        "rec_head": "latin",
        "det_probe_side": 960,
        "rec_batch": 4,
        "rec_min_width": 96,
        "runtime": CpuRuntime.AUTO,
    },
    CpuProfile.ACCURATE: {
        "rec_head": "full",
        "det_probe_side": 0,
        "rec_batch": 16,
        "rec_min_width": 320,
        "runtime": CpuRuntime.ONNXRUNTIME,
    },
}


def profile_config(profile: str, **fields) -> CpuRecognizerConfig:
    """The recognizer config of an engine profile; ``fields`` (explicit settings) override it.
    An ``auto`` runtime is resolved here, so the config says what will run."""
    if profile not in CPU_PROFILES:
        raise ValueError(f"unknown CPU engine profile {profile!r}; choose one of {', '.join(CPU_PROFILES)}")
    return with_runtime_resolved(CpuRecognizerConfig(**{**CPU_PROFILES[profile], **fields}))


def with_runtime_resolved(config: CpuRecognizerConfig) -> CpuRecognizerConfig:
    """``config`` with an ``auto`` runtime replaced by the one this CPU gets."""
    return replace(config, runtime=auto_runtime()) if config.runtime == CpuRuntime.AUTO else config


def auto_runtime(cpu_flags: frozenset[str] | None = None) -> CpuRuntime:
    """OpenVINO where the CPU has AVX-512, onnxruntime elsewhere.

    Measured with bench p2 on the recognition model (one thread, same text): on a 2-core AMD EPYC
    with AVX-512 (and BF16) OpenVINO took ~40% less CPU than onnxruntime (~30% with bfloat16 turned
    off); on a 2-core AMD EPYC with AVX2 only, ~3% more. OpenVINO also holds ~0.1 GB more, so it
    is chosen only where it pays. Flags come from /proc/cpuinfo; elsewhere (macOS, Windows, ARM)
    onnxruntime, the smaller footprint.
    """
    flags = cpu_flags if cpu_flags is not None else this_cpu_flags()
    return CpuRuntime.OPENVINO if "avx512f" in flags else CpuRuntime.ONNXRUNTIME


@functools.cache
def this_cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none), read once."""
    try:
        with Path("/proc/cpuinfo").open(encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


@functools.cache
def cpu_budget() -> int:
    """CPUs this process may keep busy: its physical cores, capped by its affinity mask and by its
    cgroup's CPU quota (a container's CPU limit), at least 1; joblib (loky) reads all three. Read
    once per process (forked pool children share their parent's cgroup).

    onnxruntime's own default reads the cores only. Measured on the 2-core dev box (2026-12-03)
    in a cgroup with a 1-CPU quota, the fast profile on the P2 pages: the default's two threads
    took 3.6-3.8 s and CPU-s per page, one thread 2.9-3.2 s; a 2-CPU pod on an 8-core node would
    run 4 threads per process (times the pool size) against its quota.
    """
    import joblib

    return max(1, joblib.cpu_count(only_physical_cores=True))


def resolve_threads(threads: int, processes: int = 1) -> int:
    """Intra-op threads for one engine: ``threads`` when set (> 0), else this process's share of
    the CPU budget among the ``processes`` that share it (a prefork pool's size), at least 1."""
    return threads if threads > 0 else max(1, cpu_budget() // max(1, processes))


def _ort_engine_cfg(threads: int) -> dict:
    return {"intra_op_num_threads": resolve_threads(threads), "inter_op_num_threads": 1}


class RapidLayoutEngine:
    """CDLA layout detection. Pages are run one after another: the model has a fixed batch of 1."""

    name = "rapid-layout:pp_layout_cdla"

    def __init__(self, config: CpuLayoutConfig) -> None:
        from rapid_layout import RapidLayout  # heavy import kept out of web processes

        self.config = config
        # rapid-layout creates its INFO loggers (own handler, no propagation) while the model
        # loads, so levels cannot be set beforehand: hold INFO back for the one-off load.
        with _info_held_back():
            self._model = RapidLayout(
                model_type="pp_layout_cdla",
                conf_thresh=config.conf_thresh,
                iou_thresh=config.iou_thresh,
                engine_cfg=_ort_engine_cfg(config.threads),
            )
        _quiet("rapid_layout")

    def detect(self, images: Sequence[np.ndarray]) -> list[list[LayoutBox]]:
        out: list[list[LayoutBox]] = []
        for image in images:
            result = self._model(_bgr(image))
            boxes: list[LayoutBox] = []
            for box, label, score in zip(
                result.boxes or [], result.class_names or [], result.scores or [], strict=False
            ):
                label = label if label in LABELS else "text"
                x0, y0, x1, y1 = (float(v) for v in box)
                boxes.append(LayoutBox(label=label, bbox=(x0, y0, x1, y1), score=float(score)))
            out.append(_drop_nested_duplicates(boxes))
        return out


class RapidOcrRecognizer:
    """PP-OCR full-page pass; lines assigned to regions by overlap."""

    name = "rapidocr:PP-OCRv6-small"

    def __init__(self, config: CpuRecognizerConfig) -> None:
        from rapidocr import RapidOCR

        _quiet("RapidOCR")
        started = time.perf_counter()
        config = with_runtime_resolved(config)
        self.config = config
        threads = resolve_threads(config.threads)
        extra: dict = {}
        if config.rec_head == "latin":
            from workers.engines.cpu_models import latin_rec_model

            extra["Rec.model_path"] = str(latin_rec_model(config.model_cache_dir))
        elif config.rec_head != "full":
            raise ValueError(f"unknown rec_head {config.rec_head!r}: 'full' or 'latin'")
        if config.runtime == CpuRuntime.OPENVINO:
            extra.update(_openvino_params(threads, extra.get("Rec.model_path")))
        elif config.runtime != CpuRuntime.ONNXRUNTIME:
            raise ValueError(f"unknown runtime {config.runtime!r}: {', '.join(CpuRuntime)}")
        self._ocr = RapidOCR(
            params={
                **extra,
                "Global.log_level": "warning",
                "Global.use_cls": config.use_cls,
                "Global.max_side_len": config.det_max_side,
                "Global.text_score": config.text_score,
                "Det.limit_side_len": config.det_limit_side,
                "Det.limit_type": config.det_limit_type,
                "Det.max_candidates": config.det_max_candidates,
                "Rec.rec_batch_num": config.rec_batch,
                "Rec.rec_img_shape": [3, 48, config.rec_min_width],
                "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            }
        )
        if config.det_probe_side > 0:
            # rapidocr loads its detector lazily; load it now and put the two-pass one in its place.
            self._ocr.text_det = _TwoPassDetector(self._ocr._load_det_model(), config)
        # Operators read what a worker really runs here: `auto` resolves per machine (auto_runtime).
        log.info(
            "CPU recognizer ready in %.1f s: recognition on %s, %s head, detection %s, %d thread(s)",
            time.perf_counter() - started,
            str(config.runtime),
            config.rec_head,
            f"probe {config.det_probe_side} px then full" if config.det_probe_side > 0 else "full size",
            threads,
        )
        # One page at a time per engine: rapidocr's OpenVINO session holds one infer request whose
        # output buffer the next call overwrites, and the two-pass detector sets its size per
        # call. Prefork workers never contend for it; a thread pool (-P threads) would.
        self._lock = threading.Lock()

    @property
    def runtime(self) -> CpuRuntime:
        """What runs recognition (an ``auto`` config resolved)."""
        return self.config.runtime

    def read_lines(self, image: np.ndarray, *, full_detection: bool = False) -> list[TextLine]:
        with self._lock:
            detector = self._ocr.text_det
            if isinstance(detector, _TwoPassDetector):
                detector.force_full = full_detection
            try:
                result = self._ocr(_bgr(image))
            except Exception as exc:  # onnxruntime raises plain exceptions on bad tensors
                raise EngineError(ErrorCode.ENGINE_OCR_FAILED, f"rapidocr failed: {exc}") from exc
        if result.boxes is None or result.txts is None:
            return []
        lines = []
        for quad, text, score in zip(result.boxes, result.txts, result.scores, strict=False):
            if text.strip():
                lines.append(TextLine(text=text.strip(), bbox=quad_to_box(quad), confidence=float(score)))
        return lines

    def recognize(self, image: np.ndarray, regions: Sequence[LayoutBox], *, cancelled=None) -> Recognition:
        # ``cancelled`` is not polled: one local pass is seconds, and the page's result is simply
        # not used once the job is cancelled.
        started = time.perf_counter()
        # A table's grid is built from its line boxes: at the probe's reduced size neighbouring
        # cells merge into one box (the arXiv table page: TEDS 0.93 at full size, 0.34 probed),
        # so a page the layout says holds a table is detected at full size.
        lines = self.read_lines(image, full_detection=any(r.label == "table" for r in regions))
        recognition = assign_lines(lines, regions)
        for i, region in enumerate(regions):
            if region.label == "table":
                recognition.texts[i] = table_text(recognition.texts[i])
        elapsed = int((time.perf_counter() - started) * 1000)
        # The pass is shared by the page; each region reports the page's latency.
        recognition.texts[:] = [replace(t, latency_ms=elapsed) for t in recognition.texts]
        return recognition


def _openvino_params(threads: int, rec_model: str | None) -> dict:
    """rapidocr's settings for recognition on OpenVINO over the wheel's own ONNX file (the path is
    given: without one rapidocr would download a model for the engine, which this product never
    does). Detection stays on onnxruntime: its whole-page inputs took OpenVINO's peak memory of
    the embedded CLI from ~0.5 to ~0.7 GB, for a tenth of the CPU saved."""
    from rapidocr import EngineType

    from workers.engines.cpu_models import wheel_rec_model

    return {
        "Rec.engine_type": EngineType.OPENVINO,
        "Rec.model_path": rec_model or str(wheel_rec_model()),
        "EngineConfig.openvino.inference_num_threads": threads,
    }


class _TwoPassDetector:
    """rapidocr's TextDetector run at a capped size first, again at full size for small print.

    The detector reads its size limits on every call, so one loaded model serves both passes.
    """

    def __init__(self, detector, config: CpuRecognizerConfig) -> None:
        self._det = detector
        self._probe = config.det_probe_side
        self._min_px = config.det_probe_min_px
        self._full = (config.det_limit_side, config.det_limit_type)
        self.last_pass = ""  # "probe" or "full": which pass the last page kept (tests, bench)
        self.force_full = False  # set per page by the recognizer (pages holding a table)

    def __getattr__(self, name):
        return getattr(self._det, name)

    def _run(self, img: np.ndarray, side: int, kind: str):
        self._det.limit_side_len, self._det.limit_type = side, kind
        return self._det(img)

    def __call__(self, img: np.ndarray):
        if self.force_full:
            self.last_pass = "full"
            return self._run(img, *self._full)
        out = self._run(img, self._probe, "max")
        if out.boxes is not None and len(out.boxes):
            scale = min(1.0, self._probe / max(img.shape[:2]))
            if float(np.median(line_heights(out.boxes))) * scale >= self._min_px:
                self.last_pass = "probe"
                return out
        self.last_pass = "full"
        return self._run(img, *self._full)


def line_heights(quads: np.ndarray) -> np.ndarray:
    """Height of each detected quad (points clockwise from top-left): mean of its two sides."""
    q = np.asarray(quads, dtype=np.float64)
    return (np.linalg.norm(q[:, 3] - q[:, 0], axis=1) + np.linalg.norm(q[:, 2] - q[:, 1], axis=1)) / 2


def table_text(text: RegionText) -> RegionText:
    """A table region's OCR lines as a grid: Markdown (HTML when cells span) and the cells.
    Lines that form no grid stay as they were read."""
    words = [tables.Word(*line.bbox, line.text) for line in text.lines]
    # OCR lines are whole phrases, so a narrow gap already separates columns.
    grid = tables.grid_from_words(words, min_gap=0.15)
    if grid is None:
        return text
    return replace(text, text=tables.region_text(grid), table=tables.to_dict(grid))


_NOT_TEXT_HOLDERS = frozenset({"figure"})


def assign_lines(lines: Sequence[TextLine], regions: Sequence[LayoutBox]) -> Recognition:
    """Give each line to the region that holds most of it; group the rest into new regions.

    Figures are not text containers: a line over a figure goes to a text region if one holds it,
    else it becomes part of an extra region, so words printed inside a chart are kept.
    """
    # The Markdown shows a figure as a placeholder, so text given to a figure would be lost there.
    holders = [i for i, r in enumerate(regions) if r.label not in _NOT_TEXT_HOLDERS]
    boxes = [regions[i].bbox for i in holders]
    buckets: list[list[TextLine]] = [[] for _ in regions]
    orphans: list[TextLine] = []
    for line in lines:
        k = best_container(line.bbox, boxes)
        if k is None:
            orphans.append(line)
        else:
            buckets[holders[k]].append(line)
    texts = [_join(bucket) for bucket in buckets]
    extra = [
        (LayoutBox(label="text", bbox=union_box(l.bbox for l in group), score=0.0), _join(group, ("outside-layout",)))
        for group in _group_lines(orphans)
    ]
    return Recognition(texts=texts, extra=extra)


def _join(lines: Sequence[TextLine], flags: tuple[str, ...] = ()) -> RegionText:
    if not lines:
        return RegionText(text="", confidence=None, flags=flags)
    ordered = sort_lines(lines)
    text = "\n".join(" ".join(l.text for l in row) for row in ordered)
    flat = [l for row in ordered for l in row]
    weights = [max(1, len(l.text)) for l in flat]
    conf = sum(l.confidence * w for l, w in zip(flat, weights, strict=True)) / sum(weights)
    return RegionText(text=text, confidence=round(conf, 4), lines=tuple(flat), flags=flags)


def sort_lines(lines: Sequence[TextLine]) -> list[list[TextLine]]:
    """Rows of lines, top to bottom; lines whose vertical centres fall within half a line height
    of each other share a row and are read left to right."""
    rows: list[list[TextLine]] = []
    for line in sorted(lines, key=lambda l: (l.bbox[1] + l.bbox[3]) / 2):
        cy = (line.bbox[1] + line.bbox[3]) / 2
        h = max(1.0, line.bbox[3] - line.bbox[1])
        if rows:
            last = rows[-1]
            lcy = sum((l.bbox[1] + l.bbox[3]) / 2 for l in last) / len(last)
            if abs(cy - lcy) < h / 2:
                last.append(line)
                continue
        rows.append([line])
    return [sorted(row, key=lambda l: l.bbox[0]) for row in rows]


def _group_lines(lines: Sequence[TextLine]) -> list[list[TextLine]]:
    """Cluster stray lines into blocks: vertically close and horizontally overlapping."""
    groups: list[list[TextLine]] = []
    for line in sorted(lines, key=lambda l: (l.bbox[1], l.bbox[0])):
        h = max(1.0, line.bbox[3] - line.bbox[1])
        for group in groups:
            gx0, _gy0, gx1, gy1 = union_box(l.bbox for l in group)
            if line.bbox[1] - gy1 < 1.5 * h and min(gx1, line.bbox[2]) > max(gx0, line.bbox[0]):
                group.append(line)
                break
        else:
            groups.append([line])
    return groups


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


@contextlib.contextmanager
def _info_held_back():
    previous = logging.root.manager.disable
    logging.disable(logging.INFO)
    try:
        yield
    finally:
        logging.disable(previous)


def _quiet(prefix: str) -> None:
    """rapid* give each module its own INFO logger; only their warnings belong in our logs."""
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(prefix):
            logging.getLogger(name).setLevel(logging.WARNING)


def _bgr(image: np.ndarray) -> np.ndarray:
    """Our page images are RGB; rapid* read ndarrays as OpenCV BGR, so flip the channels."""
    if image.ndim == 2:
        return np.stack([image] * 3, axis=-1)
    return np.ascontiguousarray(image[:, :, 2::-1])
