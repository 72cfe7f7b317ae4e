"""Scan orientation decided by reading (workers/content/orientation.py) on real pages and the
wheels' real models: upright pages stay upright at every resolution (all-caps print, a receipt,
Hebrew and Devanagari included), pages turned 90/180/270 come back upright, and a page whose
reading does not say stays as it is, flagged ``orientation:unsure``.

Every page named here was turned over by the ink-band heuristic this replaced (issue 30): the
bulletin at 150 dpi, the receipt, Hebrew and Devanagari to 180 degrees."""

from __future__ import annotations

import functools

import numpy as np
import pymupdf
import pytest
from PIL import Image

from apps.jobs.documents import render_pdf_page
from ocrsite.vocabulary import PageFlag
from tests.support.documents import BUNDLED_DATA, dev_file
from workers.content.orientation import Orientation, decide, find_orientation, turn_upright, upright
from workers.engines.cpu.orientation import OrientationReader
from workers.engines.cpu.other_scripts import OtherScriptReader

PAGES = BUNDLED_DATA / "orientation"
CORPUS = BUNDLED_DATA.parent.parent / "bench" / "corpus" / "files"
BULLETIN = PAGES / "la-precinct-bulletin-2014-p1.pdf"


@functools.cache
def reader(other_scripts: bool = True) -> OrientationReader:
    """The check's reader; ``other_scripts=False`` stands for a machine without Tesseract's models
    for the scripts the PP-OCR models lack (OCR_OTHER_SCRIPTS=false)."""
    return OrientationReader(other_scripts=other_scripts)


SCRIPT_MODELS = OtherScriptReader.find() is not None
needs_script_models = pytest.mark.skipif(
    not SCRIPT_MODELS,
    reason="Tesseract's models for other scripts are not installed here (bash .ci/script-models.sh installs them)",
)


def _image(path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB"))


def _pdf_page(path, dpi: int, index: int = 0) -> np.ndarray:
    with pymupdf.open(path) as doc:
        return render_pdf_page(doc[index], dpi, 10**9)[0]


def _turned(image: np.ndarray, rotation: int) -> np.ndarray:
    """The image with its content turned ``rotation`` degrees clockwise."""
    return np.ascontiguousarray(np.rot90(image, -rotation // 90))


@pytest.mark.parametrize("dpi", [100, 150, 200, 300])
def test_all_caps_bulletin_stays_upright_at_every_resolution(dpi):
    """The check reads pixels only: what a file says its DPI is plays no part."""
    found = find_orientation(_pdf_page(BULLETIN, dpi), reader())
    assert found == Orientation(0, lines=found.lines, read=found.read, flipped=found.flipped), found


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(lambda: _pdf_page(BULLETIN, 150), id="all-caps bulletin"),
        pytest.param(lambda: _image(PAGES / "receipt-lidl.jpg"), id="receipt"),
        pytest.param(lambda: _image(dev_file("phototest.tif")), id="phototest"),
        pytest.param(lambda: _image(dev_file("eurotext.tif")), id="eurotext"),
        pytest.param(lambda: _pdf_page(dev_file("scanned_ocr_test.pdf"), 200), id="scanned_ocr_test"),
    ],
)
@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
def test_page_turned_every_way_comes_back_upright(page, rotation):
    image = page()
    turned, found = upright(_turned(image, rotation), reader())
    assert (found.rotation, found.unsure) == (rotation, False), found
    assert np.array_equal(turned, image)


@pytest.mark.parametrize("name", ["hebtypo.jpg", "devatest.png"])
def test_other_scripts_upright_stay_upright(name):
    """Hebrew and Devanagari without models for them: the recognisers read neither, so nothing
    confirms a turn (the line classifier calls upright Hebrew upside down): the page stays,
    flagged as unconfirmed."""
    found = find_orientation(_image(PAGES / name), reader(other_scripts=False))
    assert found.rotation == 0, found
    assert found.flags == (PageFlag.ORIENTATION_UNSURE,)


@needs_script_models
@pytest.mark.slow  # each page sampled by the PP-OCR readers both ways, then by Tesseract's models: 2-7 s
@pytest.mark.parametrize(
    ("name", "rotation"),
    [("hebtypo.jpg", 0), ("hebtypo.jpg", 180), ("devatest.png", 0), ("devatest.png", 270)],
)
def test_other_scripts_are_turned_by_reading_in_their_script(name, rotation):
    """With Tesseract's models for the script (workers/engines/cpu/other_scripts.py): the lines read
    in Hebrew (Devanagari) letters one way up and not the other, so the page is confirmed upright,
    or turned back, whichever way it came; before, both stayed unsure at 0 (above)."""
    image = _image(PAGES / name)
    turned, found = upright(_turned(image, rotation), reader())
    assert (found.rotation, found.unsure) == (rotation, False), found
    assert np.array_equal(turned, image)


@needs_script_models
@pytest.mark.slow  # each page sampled by the PP-OCR readers both ways, then by Tesseract's models: 3-6 s
@pytest.mark.parametrize(
    ("name", "rotation"),
    [("udhr_rus.pdf", 0), ("udhr_rus.pdf", 90), ("udhr_bul.pdf", 90), ("udhr_arb.pdf", 180), ("udhr_hin.pdf", 180)],
)
def test_declarations_in_other_scripts_come_back_from_every_turn(name, rotation):
    """The evaluation corpus's Declarations (bench/corpus/files/udhr): one of the sample's three
    widest lines, cut along a quad that took in the next line's ascenders, reads as nothing under
    Tesseract's single-line mode. Counted as 0 confidence, it pulled the right model's sample
    under the bar (Russian 0.94 → 0.63, Arabic turned over 0.90 → 0.60), and these pages stayed
    unsure where they stood; a line read as nothing now says nothing."""
    image = _pdf_page(CORPUS / "udhr" / name, 200)
    turned, found = upright(_turned(image, rotation), reader())
    assert (found.rotation, found.unsure) == (rotation, False), found
    assert np.array_equal(turned, image)


@pytest.mark.slow  # a 2800×1700 table's sample read on both axes: ~3 s each
@pytest.mark.parametrize("rotation", [0, 90])
def test_a_table_of_figures_is_confirmed_on_the_axis_its_text_reads(rotation):
    """The NICS background-check table (a dev document): the detector joins each column of
    figures into one tall box, so more of its "lines" run down the page than across, and they
    read as nothing either way round (0.22-0.27). The page stayed unsure upright and unturned at
    90 degrees (word F1 0.63 against Tesseract's 0.97); the few real lines across, its state
    names and headings, read 0.95-0.98 and now decide."""
    image = _pdf_page(dev_file("table_nics-background-checks-2015-11.pdf"), 200)
    turned, found = upright(_turned(image, rotation), reader())
    assert (found.rotation, found.unsure) == (rotation, False), found
    assert np.array_equal(turned, image)


@pytest.mark.parametrize("rotation", [0, 180])
def test_an_upright_japanese_page_is_confirmed_and_comes_back_upright(rotation):
    """Japanese prose (tests/data/script): the tiny recogniser has no kana, so its reading is weak
    both ways (0.76 as it stands, 0.48 turned: unsure); the small full-head model reads the same
    lines again and confirms the page, whichever way it came."""
    image = _pdf_page(BUNDLED_DATA / "script" / "japanese_text.pdf", 200)
    turned, found = upright(_turned(image, rotation), reader())
    assert (found.rotation, found.unsure) == (rotation, False), found
    assert np.array_equal(turned, image)


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_weak_evidence_leaves_the_page_as_it_stands_and_flags_it(rotation):
    """Hebrew turned over or sideways, no model for it: no reading confirms any turn, so none is made."""
    found = find_orientation(_turned(_image(PAGES / "hebtypo.jpg"), rotation), reader(other_scripts=False))
    assert (found.rotation, found.unsure) == (0, True), found


def test_batch_scanner_pages_at_four_orientations():
    """OCRmyPDF's cardinal.pdf: one scan baked in at 0, 90, 180 and 270 degrees, one a page;
    rotated_skew.pdf: the same scan skewed, displayed upright through /Rotate 90."""
    found = [find_orientation(_pdf_page(BUNDLED_DATA / "cardinal.pdf", 200, i), reader()) for i in range(4)]
    assert [(f.rotation, f.unsure) for f in found] == [(0, False), (90, False), (180, False), (270, False)]
    skewed = find_orientation(_pdf_page(BUNDLED_DATA / "rotated_skew.pdf", 200), reader())
    assert (skewed.rotation, skewed.unsure) == (0, False), skewed


def test_page_stored_with_rotate_is_read_as_displayed():
    """scanned_ocr_test_rotated_90.pdf stores the upright scan with /Rotate 270: displayed, its
    text runs up the page, and the turn found is the one that displays it so."""
    image = _pdf_page(dev_file("scanned_ocr_test_rotated_90.pdf"), 200)
    found = find_orientation(image, reader())
    assert (found.rotation, found.unsure) == (270, False), found
    assert turn_upright(image, 270).shape[0] > turn_upright(image, 270).shape[1]  # portrait again


def test_a_page_without_text_is_left_alone_unflagged():
    assert find_orientation(np.full((400, 300, 3), 255, np.uint8), reader()) == Orientation(0)


@pytest.mark.parametrize(
    ("first", "second", "flipped", "expected"),
    [
        (0.97, 0.50, 0.0, (0, False)),  # reads well as it stands
        (0.50, 0.97, 1.0, (180, False)),  # reads well turned over, the classifier agrees
        (0.85, 0.60, 0.9, (0, True)),  # reads better as it stands, the classifier says otherwise
        (0.93, 0.49, 0.75, (0, False)),  # a decisive reading outweighs the classifier
        (0.52, 0.62, 1.0, (0, True)),  # upright Hebrew under a Latin recogniser: both weak
        (0.82, 0.75, 0.0, (0, True)),  # high but not clearly above the other way
    ],
)
def test_rule(first, second, flipped, expected):
    found = decide(10, False, first, second, flipped)
    assert (found.rotation, found.unsure) == expected


def test_sideways_page_never_stays_unflagged_unconfirmed():
    assert (decide(10, True, 0.6, 0.5, 0.0).rotation, decide(10, True, 0.6, 0.5, 0.0).unsure) == (0, True)
    assert decide(10, True, 0.95, 0.5, 0.0).rotation == 90
    assert decide(10, True, 0.5, 0.95, 1.0).rotation == 270
