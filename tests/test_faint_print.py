"""Faint print read at the contrast the recogniser expects: the default (``fast``) profile, real
models, the evaluation corpus's own faint variants (ink at a third of its contrast:
``bench/evaluation/corpus.py``), no mocks. Before ``rapid.with_contrast`` the typewriter page read
0.897 word F1 faint against 0.980 as scanned (Tesseract 0.941 faint)."""

from __future__ import annotations

import pytest

from bench.evaluation import corpus
from bench.evaluation.scoring import word_f1
from workers.engines.cpu import RapidOcrRecognizer, profile_config


@pytest.fixture(scope="module")
def fast(tmp_path_factory):
    return RapidOcrRecognizer(profile_config("fast", threads=1, model_cache_dir=str(tmp_path_factory.mktemp("m"))))


def _page(page_id: str):
    (page,) = corpus.pages(corpus.load(), only=f"^{page_id}$")
    return corpus.derive(page).image, page.doc.truth_text(page.number)


def test_a_faint_typewritten_page_reads_as_well_as_the_scan(fast):
    image, truth = _page("typewriter/p1/native-nometa-faint")
    assert image.min() > 150, "the variant is faint: its darkest ink is light grey"
    read = fast.read_page(image)
    assert word_f1("\n".join(line.text for line in read.lines), truth).f1 >= 0.97
