"""The evaluation corpus as committed (bench/corpus/): every file present and as its source gave it,
provenance on every document, the variants parse, and the corpus is as large as issue 30 asks."""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np
import pytest

from bench.evaluation import corpus


@pytest.fixture(scope="module")
def docs():
    return corpus.load()


def test_every_file_present_with_its_recorded_hash(docs):
    for doc in docs:
        assert doc.file.is_file(), doc.id
        assert hashlib.sha256(doc.file.read_bytes()).hexdigest() == doc.sha256, doc.id


def test_every_document_has_provenance(docs):
    for doc in docs:
        assert doc.source.licence, doc.id
        assert doc.origin, doc.id
        if doc.source.repo:
            assert len(doc.source.commit) == 40, doc.id


def _truth_files(doc) -> set:
    kind, _, arg = doc.truth.partition(":")
    if kind in ("file", "sroie"):
        return {corpus.FILES / arg}
    if kind == "pages":
        return {corpus.FILES / arg.format(page=n) for n in doc.page_numbers}
    return set()


def test_truth_files_exist(docs):
    for doc in docs:
        for path in _truth_files(doc):
            assert path.is_file(), doc.id
        for n in doc.page_numbers:
            if doc.truth:
                assert doc.truth_text(n).strip(), f"{doc.id} p{n}: empty truth"


def test_size_and_spread(docs):
    # Issue 30: at least 300 pages from at least 8 sources, in at least 6 scripts.
    pages = list(corpus.pages(docs))
    assert len(pages) >= 300
    assert len({p.doc.source.name for p in pages if p.doc.source.repo}) >= 8
    scored_scripts = {p.doc.script.split("-")[0] for p in pages if p.doc.truth}
    assert {"latin", "chinese", "japanese", "korean", "cyrillic", "arabic", "hebrew", "devanagari"} <= scored_scripts
    assert {p.variant.turn for p in pages} == {0, 90, 180, 270}
    assert any(not p.variant.meta for p in pages)
    ci = list(corpus.pages(docs, ci=True))
    assert 0 < len(ci) < len(pages)
    assert Counter(p.id for p in pages).most_common(1)[0][1] == 1


def test_variant_grammar():
    v = corpus.Variant.parse("150-nometa-r270-faint")
    assert (v.resolution, v.meta, v.turn, v.faint) == ("150", False, 270, True)
    for bad in ("r90", "150-r45", "native-r90-nometa", ""):
        with pytest.raises(ValueError):
            corpus.Variant.parse(bad)


def test_derived_page_is_turned_and_tagged(docs):
    photo = next(d for d in docs if d.id == "phototest")
    upright = corpus.derive(corpus.Page("x", photo, 1, corpus.Variant.parse("native")))
    turned = corpus.derive(corpus.Page("x", photo, 1, corpus.Variant.parse("native-nometa-r90")))
    assert turned.image.shape[:2] == upright.image.shape[1::-1]
    assert np.array_equal(turned.image, np.rot90(upright.image, -1))
    assert b"pHYs" in upright.data[:200] and b"pHYs" not in turned.data


def test_no_file_without_a_document(docs):
    # The corpus is committed: a file no document reads is weight the repository carries for nothing.
    used = {doc.file for doc in docs}
    used |= {path for doc in docs for path in _truth_files(doc)}
    on_disk = {p for p in corpus.FILES.rglob("*") if p.is_file()}
    assert sorted(str(p.relative_to(corpus.FILES)) for p in on_disk - used) == []
