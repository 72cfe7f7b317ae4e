"""The CPU engine's profiles: the Latin recognition head and two-pass detection.

Real models from the installed wheels on real scans; no mocks.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from ocrsite.vocabulary import CpuProfile
from workers.engines.cpu import (
    CPU_PROFILES,
    CpuRecognizerConfig,
    RapidOcrRecognizer,
    auto_runtime,
    cpu_budget,
    profile_config,
    resolve_threads,
)
from workers.engines.cpu.models import is_latin, latin_rec_model, rec_dictionary, rec_model, wheel_rec_model

PHOTOTEST = "tests/data/phototest.tif"


def _image(path: str) -> np.ndarray:
    with Image.open(path) as img:
        return np.asarray(img.convert("RGB"))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("models")


def test_profiles_select_their_engine_config():
    fast = profile_config("fast", threads=1)
    assert (fast.rec_head, fast.det_probe_side, fast.rec_batch, fast.rec_min_width, fast.runtime, fast.threads) == (
        "latin",
        960,
        4,
        96,
        "onnxruntime",
        1,
    )
    assert profile_config("fast", runtime="auto").runtime == auto_runtime()
    accurate = profile_config("accurate")
    assert (accurate.rec_model, accurate.det_model, accurate.det_probe_model, accurate.rec_head) == (
        "small",
        "small",
        "small",
        "latin",
    ), "accurate reads with the small models, the Latin head first"
    assert accurate.script_check, (
        "accurate reads every script the small model knows: the check sends other pages to the full head"
    )
    # An explicitly configured knob beats the profile's value.
    assert profile_config("fast", rec_batch=16).rec_batch == 16
    with pytest.raises(ValueError, match="unknown CPU engine profile"):
        profile_config("turbo")
    assert set(CPU_PROFILES) == {"fast", "accurate"} == set(CpuProfile), "the profiles settings accept"


def test_settings_choose_the_profile(settings, tmp_path):
    from workers import engine_setup
    from workers.engines.cpu.settings import recognizer_from_settings

    settings.OCR_MODEL_CACHE_DIR = str(tmp_path)
    try:
        for profile, head in (("accurate", "latin"), ("fast", "latin")):
            settings.OCR_CPU_PROFILE = profile
            engine_setup.deployment.cache_clear()
            cfg = recognizer_from_settings(engine_setup.deployment().settings)
            assert (cfg.rec_head, cfg.model_cache_dir) == (head, str(tmp_path))
        assert (cfg.det_probe_model, cfg.det_model, cfg.rec_model) == ("tiny", "small", "tiny")
        assert (cfg.reread_below, cfg.reread_model) == (0.95, "small")
        settings.OCR_REC_BATCH = 7
        settings.OCR_CPU_REREAD_BELOW = 0.0
        settings.OCR_CPU_RUNTIME = "onnxruntime"
        settings.OCR_CPU_REC_MODEL = "small"
        engine_setup.deployment.cache_clear()
        cfg = recognizer_from_settings(engine_setup.deployment().settings)
        assert (cfg.rec_batch, cfg.runtime) == (7, "onnxruntime"), "explicit settings beat the fast profile"
        assert (cfg.det_probe_model, cfg.rec_model, cfg.reread_below) == ("tiny", "small", 0.0)
    finally:
        engine_setup.deployment.cache_clear()


def test_latin_head_is_built_once_from_the_wheel(cache_dir):
    import onnx
    from onnx import numpy_helper

    path = latin_rec_model(cache_dir)
    mtime = path.stat().st_mtime_ns
    assert latin_rec_model(cache_dir) == path and path.stat().st_mtime_ns == mtime, "cached, not rebuilt"
    model = onnx.load(str(path))
    chars = next(p.value for p in model.metadata_props if p.key == "character").split("\n")
    weights = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    classes = max(w.shape[-1] for w in weights.values() if w.ndim == 2)
    assert classes == len(chars) + 2, "blank + dictionary + space, as rapidocr decodes"
    assert all(is_latin(c) for c in chars)
    assert set("AZaz09äöüßéèçñ€£$%&.,;:!?()-–—“”") <= set(chars)
    assert len(chars) < 1000 and path.stat().st_size < wheel_rec_model().stat().st_size


def test_tiny_latin_head_is_cut_from_the_tiny_dictionary(cache_dir):
    import onnx

    full, keys = rec_model("tiny", "full", cache_dir)
    assert full == wheel_rec_model("tiny") and keys is not None, "the tiny export keeps its dictionary beside it"
    latin, keys = rec_model("tiny", "latin", cache_dir)
    assert keys is None, "the cut model carries its dictionary"
    chars = next(p.value for p in onnx.load(str(latin)).metadata_props if p.key == "character").split("\n")
    assert set(chars) <= set(rec_dictionary("tiny")) and all(is_latin(c) for c in chars)
    assert set("AZaz09äöüßéèçñ€£$%&.,;:!?()-–—“”") <= set(chars)


def test_a_tiny_model_file_other_than_the_measured_one_is_refused(monkeypatch, tmp_path):
    from workers.engines.cpu import models

    other = tmp_path / "models" / "ppocrv6" / "tiny" / "rec" / "rec.onnx"
    other.parent.mkdir(parents=True)
    other.write_bytes(wheel_rec_model("tiny").read_bytes() + b"\0")
    monkeypatch.setattr(models, "_wheel_file", lambda package, relative: tmp_path / relative)
    with pytest.raises(ValueError, match="not the measured tiny export"):
        models.rec_model("tiny", "latin", tmp_path)


def test_tiny_models_read_what_the_small_ones_read(cache_dir):
    image = _image(PHOTOTEST)
    small = RapidOcrRecognizer(profile_config("accurate", threads=1)).read_lines(image)
    tiny = RapidOcrRecognizer(profile_config("fast", threads=1, model_cache_dir=str(cache_dir)))
    assert tiny.name == "rapidocr:PP-OCRv6 det tiny→small, rec tiny (< 0.95: small)"
    assert [line.text for line in tiny.read_lines(image)] == [line.text for line in small]


def test_latin_head_reads_the_same_text_as_the_full_head(cache_dir):
    image = _image(PHOTOTEST)
    base = CpuRecognizerConfig(threads=1)
    full = RapidOcrRecognizer(base).read_lines(image)
    latin = RapidOcrRecognizer(replace(base, rec_head="latin", model_cache_dir=str(cache_dir))).read_lines(image)
    assert [line.text for line in latin] == [line.text for line in full]
    assert [line.bbox for line in latin] == [line.bbox for line in full]


@pytest.mark.slow  # a 1400x2000 sheet through the full-size pass: 4-5 s
def test_two_pass_detection_keeps_the_cheap_pass_for_normal_print_only(cache_dir):
    cfg = profile_config("fast", threads=1, model_cache_dir=str(cache_dir))
    engine = RapidOcrRecognizer(cfg)
    # 12-pt print at its scan resolution: tall enough at 960 px.
    read = engine.read_page(_image(PHOTOTEST))
    assert read.lines and read.detection_pass == "probe"
    # The same page shrunk to small print on a large sheet: too small at 960 px, detected again
    # at full resolution, and still read.
    small = Image.fromarray(_image(PHOTOTEST)).resize((300, 225), Image.LANCZOS)
    sheet = Image.new("RGB", (1400, 2000), "white")
    sheet.paste(small, (100, 100))
    read = engine.read_page(np.asarray(sheet))
    assert read.detection_pass == "full"
    assert "12 point text" in " ".join(line.text for line in read.lines)


@pytest.mark.slow  # four pages, one a 1400x2000 sheet through the full-size pass: 4-5 s
def test_a_page_holding_a_table_is_detected_at_full_size(cache_dir):
    # Table grids are built from line boxes, and at the probe's size neighbouring cells merge (the
    # arXiv table page fell from TEDS 0.93 to 0.34): a table region on the page skips the probe.
    from workers.engines.base import LayoutBox

    engine = RapidOcrRecognizer(profile_config("fast", threads=1, model_cache_dir=str(cache_dir)))
    image = _image(PHOTOTEST)
    h, w = image.shape[:2]
    passes = []
    real = engine.read_page

    def spy(page, *, full_detection=False):  # records which pass each page kept; the real pass runs
        read = real(page, full_detection=full_detection)
        passes.append(read.detection_pass)
        return read

    engine.read_page = spy
    engine.recognize(image, [LayoutBox("text", (0, 0, w, h))])
    engine.recognize(image, [LayoutBox("table", (0, 0, w, h))])
    engine.recognize(image, [LayoutBox("text", (0, 0, w, h))])
    # The next page without a table is probed again: nothing of the table page's choice stays.
    # Normal print: the full-size pass runs on the probe's (tiny) model; the small one is kept for
    # small print, where the tiny detector loses words (test_two_pass_detection_...).
    assert passes == ["probe", "full-probe-model", "probe"]
    small = Image.fromarray(image).resize((w // 4, h // 4), Image.LANCZOS)
    sheet = Image.new("RGB", (1400, 2000), "white")
    sheet.paste(small, (100, 100))
    engine.recognize(np.asarray(sheet), [LayoutBox("table", (0, 0, 1400, 2000))])
    assert passes[-1] == "full"


def _cells() -> np.ndarray:
    """A grid of short numbers far apart, as in a statistics table: one short crop each."""
    from PIL import ImageDraw, ImageFont

    sheet = Image.new("RGB", (1200, 500), "white")
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default(size=32)
    for row, values in enumerate((("17", "4,082", "93"), ("250", "61", "7.5%"), ("1,204", "38", "600"))):
        for col, value in enumerate(values):
            draw.text((80 + col * 400, 60 + row * 150), value, fill="black", font=font)
    return np.asarray(sheet)


def test_auto_runtime_takes_openvino_only_where_the_cpu_has_avx512(caplog):
    # OpenVINO saves recognition CPU only with AVX-512, and holds more memory (docs/benchmarks.md),
    # so AVX2 and non-x86 machines keep onnxruntime.
    assert auto_runtime(frozenset({"fma", "avx2", "avx512f", "avx512_bf16"})) == "openvino"
    assert auto_runtime(frozenset({"fma", "avx", "f16c", "avx2"})) == "onnxruntime"
    assert auto_runtime(frozenset()) == "onnxruntime", "no /proc/cpuinfo (macOS, Windows): onnxruntime"
    here = "avx512f" in Path("/proc/cpuinfo").read_text().split()
    assert auto_runtime() == ("openvino" if here else "onnxruntime"), "this machine's own flags are read"
    with caplog.at_level("INFO", logger="workers.engines.cpu"):
        engine = RapidOcrRecognizer(CpuRecognizerConfig(threads=1, runtime="auto"))
    assert engine.runtime == auto_runtime(), "a recognizer built with auto resolves it too"
    # The worker's log says what was chosen, so an operator need not know the rule or the CPU.
    assert f"recognition on {auto_runtime()}, full head" in caplog.text


def test_openvino_reads_what_onnxruntime_reads(cache_dir):
    # Recognition on OpenVINO (what the fast profile picks on AVX-512 CPUs) over the same ONNX file
    # (the Latin head built from the wheel's model): same lines, same text, and no download (the
    # path is given).
    fast = profile_config("fast", threads=1, runtime="openvino", model_cache_dir=str(cache_dir))
    on_openvino = RapidOcrRecognizer(fast)
    on_onnxruntime = RapidOcrRecognizer(replace(fast, runtime="onnxruntime"))
    for image in (_image(PHOTOTEST), _cells()):
        lines = on_openvino.read_lines(image)
        assert lines
        assert [(l.text, l.bbox) for l in lines] == [(l.text, l.bbox) for l in on_onnxruntime.read_lines(image)]
    assert type(on_openvino.recognition_session).__name__ == "OpenVINOInferSession"
    assert type(on_onnxruntime.recognition_session).__name__ == "OrtInferSession"
    # Detection stays on onnxruntime in both (memory: whole-page inputs).
    assert type(on_openvino.detection.session).__name__ == "OrtInferSession"


@pytest.mark.parametrize("runtime", ["openvino", "onnxruntime"])
def test_threads_sharing_one_engine_each_get_their_own_page(cache_dir, runtime):
    # A Celery thread pool shares one engine per process; OpenVINO's infer request and the
    # two-pass detector's per-call size are not safe to share, so calls are serialised.
    from concurrent.futures import ThreadPoolExecutor

    engine = RapidOcrRecognizer(profile_config("fast", threads=1, runtime=runtime, model_cache_dir=str(cache_dir)))
    pages = [_image(PHOTOTEST), _cells()]
    expected = [[line.text for line in engine.read_lines(page)] for page in pages]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: [line.text for line in engine.read_lines(pages[i % 2])], range(8)))
    assert got == [expected[i % 2] for i in range(8)]


def test_short_crops_are_padded_to_the_narrow_width_and_read_the_same(cache_dir):
    # A 48x60 crop (a table cell, a short number) was padded to 320 px before recognition: the
    # fast profile pads to 96, and the text must not change.
    base = profile_config("fast", threads=1, model_cache_dir=str(cache_dir))
    narrow = RapidOcrRecognizer(base)
    wide = RapidOcrRecognizer(replace(base, rec_min_width=320))
    image = _cells()
    real = narrow.recognition_session
    widths = []

    def spy(batch):  # records the tensor widths the model gets; the real model still runs
        widths.append(batch.shape[3])
        return real(batch)

    narrow._recognition.session = spy
    texts = [line.text for line in narrow.read_lines(image)]
    assert {"17", "4,082", "93", "250", "61", "7.5%", "1,204", "38", "600"} <= set(texts)
    assert [line.text for line in wide.read_lines(image)] == texts
    assert widths and max(widths) < 320 and min(widths) >= 96


def test_a_worker_process_loads_each_engine_once(settings, tmp_path):
    from workers import engine_setup

    settings.OCR_MODEL_CACHE_DIR = str(tmp_path)
    engine_setup.deployment.cache_clear()
    engine_setup.for_job.cache_clear()
    try:
        assert engine_setup.recognizer("cpu") is engine_setup.recognizer("cpu")
        assert engine_setup.layout_engine("cpu") is engine_setup.layout_engine("cpu")
    finally:
        engine_setup.deployment.cache_clear()
        engine_setup.for_job.cache_clear()


def test_threads_default_to_this_process_share_of_its_cpus():
    assert resolve_threads(3, processes=2) == 3, "an explicit setting wins"
    assert resolve_threads(0) == cpu_budget() >= 1
    assert resolve_threads(0, processes=cpu_budget() * 4) == 1, "never fewer than one"
    assert resolve_threads(0, processes=2) == max(1, cpu_budget() // 2)


CGROUP_CPU = Path("/sys/fs/cgroup/cpu")


def test_cpu_budget_reads_a_containers_cpu_quota(tmp_path):
    # What a container sees: its own cgroup as the root of /sys/fs/cgroup, with a CPU quota.
    # Built for real with a cgroup (v1 cpu controller) holding a 0.5-CPU quota and a cgroup
    # namespace rooted there; onnxruntime's own default would still start a thread per core.
    import os
    import subprocess
    import sys
    import uuid

    if os.geteuid() != 0 or not (CGROUP_CPU / "cpu.cfs_quota_us").exists():
        pytest.skip("needs root and a cgroup v1 cpu controller to build a container's quota")
    group = CGROUP_CPU / f"ocr-test-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
        (group / "cpu.cfs_quota_us").write_text("50000")  # 0.5 CPU of the 100 ms period
    except OSError as exc:
        pytest.skip(f"cannot create a cgroup here: {exc}")
    probe = "from workers.engines.cpu import cpu_budget; print(cpu_budget())"
    inner = f"umount {CGROUP_CPU}; mount -t cgroup -o cpu cgroup {CGROUP_CPU} && exec {sys.executable} -c '{probe}'"
    try:
        run = subprocess.run(
            ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec unshare -m -C sh -c "{inner}"'],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parent.parent,
        )
    finally:
        group.rmdir()
    if run.returncode != 0 and "unshare" in run.stderr:
        pytest.skip(f"cannot enter a cgroup namespace here: {run.stderr.strip()}")
    assert run.returncode == 0, run.stderr
    assert int(run.stdout.strip()) == 1, "0.5 CPU of quota is one CPU's worth of threads, whatever the cores"


def test_openvino_sees_widths_in_steps_and_full_batches_and_reads_the_same(cache_dir):
    # OpenVINO keeps memory for every input shape it has run, so exact crop widths made a worker
    # grow page after page. The fast profile rounds widths up to steps and fills every batch:
    # the shapes come from a small set, and the text read is the same as at exact widths.
    stepped = RapidOcrRecognizer(profile_config("fast", threads=1, runtime="openvino", model_cache_dir=str(cache_dir)))
    exact = RapidOcrRecognizer(replace(stepped.config, rec_width_step=0))
    assert stepped.config.rec_width_step == 160
    real = stepped.recognition_session
    shapes = []

    def spy(batch):  # records the tensor shapes the model gets; the real model still runs
        shapes.append(batch.shape)
        return real(batch)

    stepped._recognition.session = spy
    for image in (_image(PHOTOTEST), _cells()):
        assert [l.text for l in stepped.read_lines(image)] == [l.text for l in exact.read_lines(image)]
    assert shapes and all(s[0] == stepped.config.rec_batch and s[3] % 160 == 0 for s in shapes), shapes


def test_fused_layout_model_finds_the_same_regions_as_the_wheels(cache_dir):
    import onnx

    from workers.engines.cpu import CpuLayoutConfig, RapidLayoutEngine
    from workers.engines.cpu.models import fused_layout_model

    path = fused_layout_model(cache_dir)
    ops = [n.op_type for n in onnx.load(str(path)).graph.node]
    assert ops.count("HardSwish") == 94 and "Clip" not in ops and "Div" not in ops
    image = _image("tests/data/phototest.tif")
    wheel = RapidLayoutEngine(CpuLayoutConfig(threads=1, fused=False)).detect([image])[0]
    fused = RapidLayoutEngine(CpuLayoutConfig(threads=1, model_cache_dir=str(cache_dir))).detect([image])[0]
    assert wheel and [b.label for b in fused] == [b.label for b in wheel]
    assert np.allclose([b.bbox for b in fused], [b.bbox for b in wheel], atol=0.5)
    assert np.allclose([b.score for b in fused], [b.score for b in wheel], atol=1e-4)


# Run in a child process set up as `manage.py ocr` sets itself up when asked to put memory first
# (OCR_CLI_MMAP_THRESHOLD, before any engine loads), so this suite's allocator keeps glibc's
# defaults. The page is read three times at full size; each pass's rise of resident memory above
# the resting level is sampled every 5 ms.
_FULL_SIZE_PASSES = """
import json, sys, threading, time
import django
django.setup()
from django.conf import settings
from ocrsite.memory import release_freed_memory, return_large_buffers
memory_first = return_large_buffers(settings.OCR_CLI_MMAP_THRESHOLD)
import numpy as np, psutil, pymupdf
from workers import engine_setup
from workers.engines.cpu import RapidOcrRecognizer
from workers.engines.cpu.settings import recognizer_from_settings
config = recognizer_from_settings(engine_setup.deployment().settings)
engine = RapidOcrRecognizer(config)
with pymupdf.open(sys.argv[1]) as doc:
    pix = doc[0].get_pixmap(dpi=200, colorspace=pymupdf.csRGB, alpha=False)
page = np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.width, 3)
me = psutil.Process()

def rise():
    release_freed_memory()
    base = peak = me.memory_info().rss
    done = threading.Event()
    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, me.memory_info().rss)
            time.sleep(0.005)
    sampler = threading.Thread(target=sample)
    sampler.start()
    engine.read_page(page, full_detection=True)
    done.set()
    sampler.join()
    return (peak - base) / 2**20

print(json.dumps({
    "memory_first": memory_first,
    "patterns": engine.detection.session.session.get_session_options().enable_mem_pattern,
    "rises": [rise() for _ in range(3)],
}))
"""


@pytest.mark.slow  # a child process running four full-size passes: ~15 CPU-seconds
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CLI's memory-first policy is glibc's")
def test_the_clis_full_size_pass_costs_the_same_memory_each_time_a_page_comes():
    # With onnxruntime's memory patterns on, the second full-size pass over a shape allocated the
    # block planned from the first: ~545 MB where the first had peaked ~420 MB, so the CLI's peak
    # grew with a document's page count (bench memory: 12 pages 1.19x the largest single page).
    import json
    import os
    import subprocess

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ocrsite.settings", "OCR_ENGINE_THREADS": "1"}
    env["OCR_CLI_MMAP_THRESHOLD"] = str(2 << 20)
    out = subprocess.run(
        [sys.executable, "-c", _FULL_SIZE_PASSES, "tests/data/senate-expenditures.pdf"],  # a real page
        cwd=Path(__file__).resolve().parents[1],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["memory_first"] and found["patterns"] is False, found
    rises = found["rises"]
    assert rises[0] > 100, rises  # the full-size pass ran (its tensors are hundreds of MB)
    assert max(rises[1:]) <= rises[0] * 1.1 + 20, f"MB above the resting RSS per pass: {[round(r) for r in rises]}"


def test_unsure_lines_are_read_again_by_the_stronger_model_and_the_surer_reading_kept(cache_dir):
    # fast reads with the tiny model and re-reads its unsure lines with the small one (the NICS
    # 6-pt table: 0.971 -> 0.976 word F1). Threshold 1.0 here: every line is re-read.
    # On onnxruntime throughout, so the small model alone reads each crop exactly as the re-reader
    # does (the re-reader runs on onnxruntime whatever reads first; OpenVINO pads widths in steps).
    config = profile_config("fast", threads=1, runtime="onnxruntime", model_cache_dir=str(cache_dir))
    assert config.reread_below > 0 and config.reread_model == "small" and config.rec_model == "tiny"
    tiny_only = RapidOcrRecognizer(replace(config, reread_below=0.0))
    small_only = RapidOcrRecognizer(replace(config, rec_model="small", reread_below=0.0))
    both = RapidOcrRecognizer(replace(config, reread_below=1.0))
    assert tiny_only._rereader is None and "(< 1: small)" in both.name
    image = _image(PHOTOTEST)
    lines = {name: e.read_page(image).lines for name, e in (("tiny", tiny_only), ("small", small_only), ("both", both))}
    assert len(lines["tiny"]) == len(lines["small"]) == len(lines["both"]) > 5
    took_small = 0
    for tiny, small, kept in zip(lines["tiny"], lines["small"], lines["both"], strict=True):
        surer = max(tiny, small, key=lambda line: line.confidence)
        assert kept.confidence == pytest.approx(max(tiny.confidence, surer.confidence), abs=2e-3), (tiny, small, kept)
        took_small += kept.text == small.text and kept.text != tiny.text
        assert kept.confidence >= tiny.confidence - 2e-3
    assert took_small or all(t.text == s.text for t, s in zip(lines["tiny"], lines["small"], strict=True))


def test_models_load_when_a_page_first_needs_them(cache_dir):
    # The embedded CLI pays for each model it loads (a blank page cost 8.7 CPU-s and 788 MB before
    # any text was read): a blank page loads none, a page of normal print loads the probe and the
    # recogniser but not the full-size detector.
    engine = RapidOcrRecognizer(profile_config("fast", threads=1, model_cache_dir=str(cache_dir)))
    blank = np.full((2339, 1654, 3), 240, np.uint8)
    assert engine.read_page(blank) == type(engine.read_page(blank))([], "blank")
    assert engine.detection._built == {} and "_recognition" not in vars(engine) and "_rapid" not in vars(engine)
    read = engine.read_page(_image(PHOTOTEST))
    assert read.detection_pass == "probe" and read.lines
    assert set(engine.detection._built) == {"probe"} and "_recognition" in vars(engine)
    # A sheet with a small stamp-like mark: the probe finds no text and the page has too little ink
    # for small print, so it ends there; the full-size detector still never loads.
    mark = blank.copy()
    mark[1000:1040, 700:760] = 0
    assert engine.read_page(mark).detection_pass == "probe"
    assert "full" not in engine.detection._built


def test_optimised_graphs_are_written_once_and_compute_the_same(tmp_path):
    # Later processes load the graph onnxruntime optimised for this CPU instead of optimising again.
    import onnxruntime as ort

    from workers.engines.cpu.models import optimized_model, ort_session, wheel_model

    source = wheel_model("det", "tiny")
    first = optimized_model(source, tmp_path)
    assert first is not None and first.exists() and first.parent == tmp_path
    stamp = first.stat().st_mtime_ns
    assert optimized_model(source, tmp_path) == first and first.stat().st_mtime_ns == stamp
    assert not list(tmp_path.glob("*.tmp")), "the temporary file is renamed into place"
    x = np.random.default_rng(0).random((1, 3, 320, 480), dtype=np.float32)
    plain = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    cached = ort_session(source, 1, tmp_path)
    name = plain.get_inputs()[0].name
    np.testing.assert_allclose(cached.run(None, {name: x})[0], plain.run(None, {name: x})[0], atol=1e-5)
    # Another CPU or onnxruntime version is another file name: the optimised graph may hold
    # kernels of one CPU family.
    assert "ort-" in first.name
