"""The OCR engines the cpu-engine benchmark compares, each as "image in, plain text out".

The CPU engine is built exactly as a worker builds it (``workers.engine_setup.deployment()``
reads the same settings), so a tuned default measured here is the default that runs in
production; ``Product`` runs what a page costs in the product, layout and recognition.
Tesseract is measured two ways: through its C++ API in-process (tesserocr: one loaded engine
reused across pages, as ours is) and as the CLI (a process per page, start-up included).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
from PIL import Image

from workers.engines.cpu import (
    CPU_PROFILES,
    CpuLayoutConfig,
    CpuRecognizerConfig,
    RapidLayoutEngine,
    RapidOcrRecognizer,
    sort_lines,
    with_runtime_resolved,
)


def django_settings():
    """The settings module, read without django.setup(): the benchmarks only read engine settings,
    and setting up apps would tie them to every model import of the moment."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ocrsite.settings")
    from django.conf import settings

    return settings


def production_config(**overrides) -> CpuRecognizerConfig:
    """The recognizer config a worker builds (``workers.engine_setup`` reads the same settings)."""
    django_settings()
    from workers import engine_setup
    from workers.engines.cpu.settings import recognizer_from_settings

    return replace(recognizer_from_settings(engine_setup.deployment().settings), **overrides)


def profile_config(profile: str, **overrides) -> CpuRecognizerConfig:
    """The deployment's recognizer config under an engine profile (OCR_CPU_PROFILE), its ``auto``
    runtime resolved for this CPU as a worker resolves it, so run records say what ran."""
    return with_runtime_resolved(production_config(**{**CPU_PROFILES[profile], **overrides}))


class Product:
    """What a page costs in the product: CDLA layout, then the recognizer over those regions.
    The text is every region's text and the lines outside all regions."""

    def __init__(self, config: CpuRecognizerConfig, label: str = "ours") -> None:
        self.config = config
        self.label = label
        self.layout = RapidLayoutEngine(CpuLayoutConfig(threads=config.threads, model_cache_dir=config.model_cache_dir))
        self.engine = RapidOcrRecognizer(config)

    def warm(self, image: np.ndarray) -> None:
        """Every model loaded before the clock (they load when a page first needs them): the page
        once as the product reads it, once detected at full size, and the re-reader."""
        self(image, 0)
        self.engine.read_page(image, full_detection=True)
        _ = self.engine._rereader

    def __call__(self, image: np.ndarray, dpi: int) -> str:
        regions = self.layout.detect([image])[0]
        result = self.engine.recognize(image, regions)
        # A table region's text is its grid as Markdown (HTML where cells span): its separators and
        # tags are not words of the page, so a table is compared by the words of its lines.
        texts = [" ".join(line.text for line in t.lines) if t.table else t.text for t in result.texts]
        texts += [t.text for _box, t in result.extra]
        return "\n".join(t for t in texts if t)


class TesseractApi:
    """Tesseract through tesserocr: the engine and its ``eng`` model loaded once, pages set as
    in-memory images (the same pixels ours gets). Its thread count follows OMP_THREAD_LIMIT as
    read when the library loads, so each thread setting runs in its own process."""

    def __init__(self, label: str = "tesseract-api") -> None:
        import tesserocr

        self.label = label
        self._api = tesserocr.PyTessBaseAPI(path=_tessdata(), lang="eng")
        self._version = tesserocr.tesseract_version().splitlines()[0]

    def version(self) -> str:
        return f"{self._version} (tesserocr)"

    def warm(self, image: np.ndarray) -> None:
        self(image, 300)

    def __call__(self, image: np.ndarray, dpi: int) -> str:
        self._api.SetImage(Image.fromarray(image))
        if dpi:
            self._api.SetSourceResolution(dpi)
        return self._api.GetUTF8Text()


def _tessdata() -> str:
    """The tessdata folder holding eng.traineddata (Debian's package, or TESSDATA_PREFIX)."""
    candidates = [os.environ.get("TESSDATA_PREFIX", ""), *sorted(Path("/usr/share/tesseract-ocr").glob("*/tessdata"))]
    for folder in candidates:
        if folder and (Path(folder) / "eng.traineddata").exists():
            return str(folder)
    raise RuntimeError("no eng.traineddata found: apt-get install -y tesseract-ocr-eng or set TESSDATA_PREFIX")


class Rapid:
    """RapidOcrRecognizer.read_lines over the full page, lines joined in reading rows."""

    def __init__(self, config: CpuRecognizerConfig, label: str = "rapidocr") -> None:
        self.config = config
        self.label = label
        self.engine = RapidOcrRecognizer(config)

    def warm(self, image: np.ndarray) -> None:
        self.engine.read_lines(image)

    def __call__(self, image: np.ndarray, dpi: int) -> str:
        lines = self.engine.read_lines(image)
        return "\n".join(" ".join(line.text for line in row) for row in sort_lines(lines))


class Tesseract:
    """``tesseract IMG stdout`` on a PNG of the same pixels. ``threads`` sets OMP_THREAD_LIMIT
    (Debian's build uses OpenMP); 0 leaves Tesseract's default."""

    def __init__(self, threads: int = 0, label: str = "tesseract") -> None:
        if shutil.which("tesseract") is None:
            raise RuntimeError("tesseract is not installed: apt-get install -y tesseract-ocr")
        self.threads = threads
        self.label = label
        self.env = dict(os.environ)
        if threads:
            self.env["OMP_THREAD_LIMIT"] = str(threads)
        self._tmp = tempfile.TemporaryDirectory(prefix="bench-tess-")

    def version(self) -> str:
        out = subprocess.run(["tesseract", "--version"], capture_output=True, text=True, check=True)
        return out.stdout.splitlines()[0]

    def prepare(self, image: np.ndarray, name: str) -> str:
        """The PNG is written before timing starts: the CPU engine gets its pixels in memory."""
        path = Path(self._tmp.name) / f"{abs(hash(name))}.png"
        if not path.exists():
            Image.fromarray(image).save(path, compress_level=1)
        return str(path)

    def warm(self, image: np.ndarray) -> None:
        self.run(self.prepare(image, "warm"), 300)

    def run(self, path: str, dpi: int) -> str:
        proc = subprocess.run(
            ["tesseract", path, "stdout", "--dpi", str(dpi), "-l", "eng"],
            capture_output=True,
            text=True,
            env=self.env,
            check=True,
        )
        return proc.stdout
