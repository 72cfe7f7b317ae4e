"""The pure parts of script routing and band reading (workers.engines.cpu.script, .tiles): when a
page's script is checked and what decides it; how bands cover a page so every line is kept once."""

from __future__ import annotations

import numpy as np
import pytest

from workers.engines.cpu import script, tiles


def test_confident_latin_pages_are_not_checked():
    assert not script.needs_check([0.98] * 40 + [0.6])  # one odd line on a page of print
    assert not script.needs_check([0.6, 0.98, 0.97])  # one is not evidence, even on a short page
    assert script.needs_check([0.6, 0.7, 0.99, 0.98])
    assert script.needs_check([0.65] * 11)
    # ... but a page whose only line is unsure is: a one-word image in a script the Latin head does
    # not know (tesseract-ocr/test's arabic.tif) was kept as nothing, unflagged.
    assert script.needs_check([0.6])
    assert not script.needs_check([0.9])
    assert not script.needs_check([])


def test_the_widest_unsure_lines_are_sampled():
    scores = [0.99, 0.5, 0.6, 0.7, 0.95]
    widths = [30.0, 2.0, 9.0, 5.0, 40.0]
    assert script.sample(scores, widths, n=2) == [2, 3]


@pytest.mark.parametrize(
    ("readings", "expected"),
    [
        ([("文字認識の評価用ページ", 0.99), ("2023", 0.98)], script.SCRIPT_CJK),
        ([("Invoice total", 0.93), ("due 12 May", 0.9)], script.SCRIPT_LATIN),
        ([(".", 0.64), ("", 0.3)], script.SCRIPT_UNSUPPORTED),  # what the full head makes of Hangul
        ([], script.SCRIPT_UNSUPPORTED),
    ],
)
def test_the_full_head_reading_of_the_sample_decides(readings, expected):
    check = script.judge(readings)
    assert check.script == expected
    assert check.flags == ((script.FLAG_SCRIPT_UNSUPPORTED,) if expected == script.SCRIPT_UNSUPPORTED else ())


def test_a_sure_reading_of_spaces_and_commas_has_read_nothing():
    """What the full head makes of Cyrillic lines (the UDHR in Russian): sure, and almost empty."""
    readings = [("         ", 0.95), ("  ,  ,     ", 0.93), ("     ,     ; ", 0.94)]
    assert script.judge(readings).script == script.SCRIPT_LATIN, "by confidence alone"
    assert script.judge(readings, [20.0, 24.0, 22.0]).script == script.SCRIPT_UNSUPPORTED
    assert script.judge([("Invoice total due", 0.93)], [9.0]).script == script.SCRIPT_LATIN
    assert script.judge([("文字認識の評価用ページ", 0.99)], [11.5]).script == script.SCRIPT_CJK


def test_a_page_read_well_without_a_check_is_named_by_its_characters():
    assert script.script_of([("盐城高新区投资集团", 0.99), ("AA+", 0.99)]) == script.SCRIPT_CJK
    assert script.script_of([("Hello world", 0.99)]) == script.SCRIPT_LATIN


def test_only_a_strong_shrink_of_small_print_is_banded():
    lines = np.full(30, 10.0)
    assert tiles.needs_bands(lines, 0.28, 0.5, 20, 2.0, 0.1)
    assert not tiles.needs_bands(lines, 0.71, 0.5, 20, 2.0, 0.1), "a mild shrink gains too little"
    assert not tiles.needs_bands(np.full(30, 36.0), 0.28, 0.5, 20, 2.0, 0.1), "large print reads shrunk"
    assert tiles.needs_bands(np.zeros(0), 0.28, 0.5, 20, 2.0, 0.1), "nothing found: look closer"
    merged = np.array([22.0] * 20 + [90.0] * 5)
    assert tiles.needs_bands(merged, 0.28, 0.5, 20, 2.0, 0.1), "merged blocks of small print"
    assert not tiles.needs_bands(lines, 0.28, 0.5, 0, 2.0, 0.1), "0 turns bands off"


def test_band_scale_gives_lines_their_pixels_and_never_enlarges():
    assert tiles.band_scale(np.full(5, 10.0), 0.25, 32) == pytest.approx(0.8)  # 40 px lines at full size
    assert tiles.band_scale(np.full(5, 5.0), 0.25, 32) == 1.0
    assert tiles.band_scale(np.zeros(0), 0.25, 32) == 1.0


@pytest.mark.parametrize(("height", "width"), [(7017, 4959), (3000, 9000), (900, 800), (20000, 1500)])
def test_every_line_is_kept_by_exactly_one_band(height, width):
    line_px = 32.0
    bands = tiles.plan(height, width, 2000 * 1414, line_px)
    assert bands[0].top == 0 and bands[-1].bottom == height
    assert all(b.bottom - b.top <= max(2000 * 1414 // width, 3 * tiles.MIN_OVERLAP_PX) for b in bands)
    # Lines of every height up to the overlap, at every position down the page.
    for h in (12.0, 32.0, 100.0):
        for y in np.arange(0.0, height - h, 7.3):
            owners = 0
            for band in bands:
                top = y - band.top
                if top + h <= 0 or top >= band.bottom - band.top:
                    continue  # not in this band at all
                # The detector sees only the band: a line crossing its edge comes back clipped.
                quad = np.array(
                    [
                        [
                            [5, max(top, 0)],
                            [50, max(top, 0)],
                            [50, min(top + h, band.bottom - band.top)],
                            [5, min(top + h, band.bottom - band.top)],
                        ]
                    ],
                    np.float32,
                )
                owners += int(tiles.kept(quad, band, height)[0])
            assert owners == 1, (h, y, owners)


def test_content_box_is_what_the_shrunk_page_showed_and_a_margin():
    quads = np.array([[[100, 200], [900, 200], [900, 240], [100, 240]]], np.float32)
    assert tiles.content_box(quads, 7000, 5000, margin=0.01) == (30, 130, 970, 310)
    assert tiles.content_box(np.zeros((0, 4, 2)), 7000, 5000) == (0, 0, 5000, 7000)


def test_a_reading_of_words_no_latin_language_writes_looks_misread():
    # The fast profile's confident reading of the Ukrainian Declaration's first lines.
    ukrainian = (
        "3ATAIbHA AEKIAPALIA NPAB IIOAVHI bepyun Ao yBarn, 4o BI3HaHHA riAHOcTi, AKa BracTVBa BCiM "
        "4neHaM nIOACb Ta HeBiA'€MHVx ix npaB ∈ OCHOBo1o cB060Ai, cnpaBeAIVBoCTi Ta 3aralbHor "
        "6epyun AO yBarn, 4o 3HeBaxaHHa i HexTyBaHHA npaBaMn nIOAVHI npv3Benn A"
    )
    assert script.looks_misread(ukrainian)
    english = (
        "Whereas recognition of the inherent dignity and of the equal and inalienable rights of all "
        "members of the human family is the foundation of freedom, justice and peace in the world. "
        "Invoice No. 4711, 10kg of A4 paper, due 12 May 2023, from ACME GmbH in Berlin."
    )
    assert not script.looks_misread(english)
    assert not script.looks_misread("HapoAiB 06'eAHaHIx nIOAVHI")  # too few words to say
