"""Rotation never costs text: born-digital pages turned every way (/Rotate, and text drawn
turned on the page) read as their upright twin, word for word, in the same order, with the same
table cells; real documents printed sideways or stored with /Rotate come out as tables; pure: the
text-layer engine on PyMuPDF pages, no database."""

from __future__ import annotations

import pymupdf
import pytest

from bench.accuracy import order_scores, word_scores
from tests.support.documents import BUNDLED_DATA, dev_file
from workers.engines import textlayer

BORN_DIGITAL = [
    ("multi_page.pdf", 0),
    ("multi_page.pdf", 2),
    ("code_and_formula.pdf", 1),
    # The table pages cost seconds each to read twice (the NICS page ~10 CPU-s): make test only.
    pytest.param("table_page_2305.03393v1-pg9.pdf", 0, marks=pytest.mark.slow),
    pytest.param("table_nics-background-checks-2015-11.pdf", 0, marks=pytest.mark.slow),
]


def _read(page: pymupdf.Page) -> textlayer.TextLayerPage:
    return textlayer.read_page(page, 100, textlayer.TextLayerConfig())


def _text(read: textlayer.TextLayerPage) -> str:
    return "\n".join(text.text for box, text in sorted(read.regions, key=lambda r: r[0].order))


def _cells(read: textlayer.TextLayerPage) -> list[list[tuple]]:
    return [
        [(c["row"], c["col"], c["rowspan"], c["colspan"], c["text"]) for c in text.table["cells"]]
        for _, text in read.regions
        if text.table
    ]


def _twin(src: pymupdf.Document, index: int, rotation: int, how: str) -> pymupdf.Document:
    """The page turned ``rotation`` degrees clockwise: by its /Rotate, or with its content drawn
    turned (a rotation matrix) on a page of the turned shape, the way a sideways table is printed."""
    doc = pymupdf.open()
    if how == "rotate":
        doc.insert_pdf(src, from_page=index, to_page=index)
        doc[0].set_rotation(rotation)
        return doc
    rect = src[index].rect
    width, height = (rect.height, rect.width) if rotation % 180 else (rect.width, rect.height)
    page = doc.new_page(width=width, height=height)
    page.show_pdf_page(page.rect, src, index, rotate=-rotation)
    return doc


@pytest.mark.parametrize(("name", "index"), BORN_DIGITAL)
@pytest.mark.parametrize("how", ["rotate", "drawn"])
def test_turned_twin_reads_as_its_upright_page(name, index, how):
    src = pymupdf.open(dev_file(name))
    upright = _read(src[index])
    for rotation in (90, 180, 270):
        turned = _read(_twin(src, index, rotation, how)[0])
        assert turned.rotation == rotation
        words, order = word_scores(_text(turned), _text(upright)), order_scores(_text(turned), _text(upright))
        assert words.f1 >= 0.98 and order.f1 >= 0.98, (rotation, words, order)
        assert _cells(turned) == _cells(upright), rotation
        assert turned.verdict.held and not turned.flags, turned.verdict.describe()


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_boxes_are_on_the_page_as_displayed(rotation):
    """Every region and cell box lies on the displayed page, and a turned page's boxes are its
    upright twin's boxes turned with it."""
    src = pymupdf.open(dev_file("table_page_2305.03393v1-pg9.pdf"))
    doc = _twin(src, 0, rotation, "rotate")
    page = doc[0]
    read = _read(page)
    width, height = page.rect.width * 100 / 72, page.rect.height * 100 / 72
    for box, _text in read.regions:
        x0, y0, x1, y1 = box.bbox
        assert 0 <= x0 < x1 <= width + 0.5 and 0 <= y0 < y1 <= height + 0.5, box
    # The upright page's boxes, carried onto the displayed page by its rotation matrix.
    upright = _read(src[0])
    to_shown = pymupdf.Matrix(72 / 100, 72 / 100) * page.rotation_matrix * pymupdf.Matrix(100 / 72, 100 / 72)
    expected = sorted(
        tuple(round(v) for v in (pymupdf.Rect(b.bbox) * to_shown).normalize()) for b, _ in upright.regions
    )
    assert sorted(tuple(round(v) for v in b.bbox) for b, _ in read.regions) == expected


def test_senate_listing_stored_with_rotate_90_is_a_table_of_records():
    """The landscape expenditure listing of the issue (pdfplumber's senate-expenditures.pdf,
    /Rotate 90, a ruled header over whitespace-aligned rows): it lost 216 of its 637 words and
    scrambled its columns. Now every word is kept and each record is one row: document number,
    dates, payee, description and amount in their own cells."""
    read = _read(pymupdf.open(BUNDLED_DATA / "senate-expenditures.pdf")[0])
    assert read.verdict.held and not read.flags
    [table] = [text.table for _, text in read.regions if text.table]
    rows: dict[int, dict[int, str]] = {}
    for c in table["cells"]:
        rows.setdefault(c["row"], {})[c["col"]] = c["text"]
    records = [r for r in rows.values() if r.get(0, "").startswith("DHAW")]
    printed = [w[4] for w in pymupdf.open(BUNDLED_DATA / "senate-expenditures.pdf")[0].get_text("words")]
    assert [r[0] for r in records] == [w for w in printed if w.startswith("DHAW")]  # one row each
    assert all(len(r[0].split()) == 1 and r.get(6) for r in records)
    first = records[0]
    assert [first[k] for k in (0, 1, 2, 3, 4, 6)] == [
        "DHAW20190001",
        "05/03/2019",
        "CITIBANK - TRAVEL CBA CARD",
        "03/04/2019",
        "03/06/2019",
        "920.68",
    ]
    assert first[5].startswith("STAFF TRANSPORTATION AIRFARE FOR E JOHNSON")


def test_sideways_tables_printed_both_ways_give_one_grid():
    """camelot's rotated-table files: the same ruled table printed turned anticlockwise on a
    portrait page, and clockwise (drawn turned, on a page stored with /Rotate 180)."""
    grids = []
    for name in ("anticlockwise_table_1.pdf", "clockwise_table_1.pdf"):
        read = _read(pymupdf.open(BUNDLED_DATA / name)[0])
        assert read.verdict.held
        assert read.rotation in (90, 270)
        grids.append(_cells(read))
    assert grids[0] == grids[1]
    [cells] = grids[0]
    assert max(c[0] for c in cells) + 1 == 16 and max(c[1] for c in cells) + 1 == 7
