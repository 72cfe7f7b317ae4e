"""``manage.py ocr FILE``: the embedded profile in a fresh process — SQLite in a temporary
OCR_VAR_DIR, local storage, eager Celery, no broker — exactly as a newcomer runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.documents import ROOT, dev_file

# Each test runs the whole embedded CLI in a fresh process (Django, engines, a real document):
# seconds apiece, make test only.
pytestmark = pytest.mark.slow

# What `make test` sets for the suite and the embedded profile must not see.
SUITE_ONLY = ("DATABASE_URL", "CELERY_BROKER_URL", "OCR_MEDIA_ROOT", "CACHE_URL")


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("embedded-var")


def ocr(var_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in SUITE_ONLY}
    env["OCR_VAR_DIR"] = str(var_dir)
    return subprocess.run(
        [sys.executable, "manage.py", "ocr", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_scan_prints_markdown(var_dir):
    run = ocr(var_dir, str(dev_file("phototest.tif")))
    assert run.returncode == 0, run.stderr
    out = run.stdout.lower()
    assert "quick brown dog" in out and "lazy fox" in out
    # phototest.tif has no heading: CDLA calls its first two lines a title, recognition demotes it.
    assert run.stdout.startswith("This is a lot of 12 point text"), run.stdout[:200]
    assert (var_dir / "ocr.sqlite3").exists(), "the embedded profile uses SQLite in OCR_VAR_DIR"
    assert "%" not in run.stderr, "a one-page document gets no progress bar"
    assert " INFO " not in run.stderr, "the terminal shows the document, not the pipeline's INFO log"


def test_multipage_json_with_progress_on_stderr(var_dir):
    run = ocr(var_dir, str(dev_file("multi_page.pdf")), "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["page_count"] == 5 and len(result["pages"]) == 5
    for page in result["pages"]:
        assert page["regions"], page["index"]
        for region in page["regions"]:
            assert {"label", "bbox", "bbox_pt", "text", "order", "source", "engine"} <= set(region)
            assert len(region["bbox"]) == len(region["bbox_pt"]) == 4
    assert "word processor" in json.dumps(result).lower()
    # The bar counts pages on stderr and never mixes into the result on stdout.
    assert "multi_page.pdf" in run.stderr and "5/5" in run.stderr, run.stderr


def test_quiet_and_out(var_dir, tmp_path):
    out = tmp_path / "result.md"
    run = ocr(var_dir, str(dev_file("multi_page.pdf")), "--quiet", "--out", str(out))
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    assert "5/5" not in run.stderr
    assert out.read_text().startswith("# The Evolution of the Word Processor")


def test_refused_file_exits_non_zero_with_its_code(var_dir):
    run = ocr(var_dir, str(dev_file("bad_password-example.pdf")))
    assert run.returncode != 0
    assert "input:encrypted" in run.stderr
    assert run.stdout == ""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt is glibc's")
def test_cli_fixes_glibc_mmap_threshold_only_when_asked(var_dir):
    # The embedded CLI's lower peak memory (docs/benchmarks.md, "CPU engine") rests on
    # this call taking effect before the engines load; 0 must leave glibc alone. In a child
    # process, so this suite's own allocator keeps glibc's defaults.
    code = (
        "import django; django.setup();"
        "from ocrsite.memory import return_large_buffers as r, memory_first as m;"
        "print(r(0), m(), r(2 * 1024 * 1024), m())"
    )
    env = {k: v for k, v in os.environ.items() if k not in SUITE_ONLY}
    env.update(OCR_VAR_DIR=str(var_dir), DJANGO_SETTINGS_MODULE="ocrsite.settings")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False", "True", "True"], out.stderr[-2000:]


def test_the_embedded_pipeline_starts_without_the_web_side(var_dir):
    """Starting the embedded pipeline loads neither the URL conf (Django's system checks, which
    Celery's Django fixup runs as it imports the task modules: ~0.4 CPU-s of a blank page's 1.3)
    nor PyMuPDF for an image; the tasks are registered all the same."""
    code = (
        "import sys, django; django.setup();"
        "from apps.jobs import embedded; embedded.start();"
        "from ocrsite.celery import app;"
        "print('ocrsite.urls' in sys.modules, 'pymupdf' in sys.modules, 'workers.ingest' in app.tasks)"
    )
    env = {k: v for k, v in os.environ.items() if k not in SUITE_ONLY}
    env.update(OCR_VAR_DIR=str(var_dir), DJANGO_SETTINGS_MODULE="ocrsite.settings")
    env.pop("CELERY_SKIP_CHECKS", None)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False", "True"], (out.stdout, out.stderr[-2000:])
