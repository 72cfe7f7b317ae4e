"""Born-digital pages: regions and words straight from the PDF's text layer (PyMuPDF).

No rendering and no OCR: this path is the fast lane. Boxes are returned in page pixels at the
``dpi`` the caller names, so text-layer and OCR pages share one coordinate convention.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ocrsite.vocabulary import PageFlag
from workers.content import conservation, tables
from workers.content.order import reading_order
from workers.engines.base import LayoutBox, RegionText, TextLine
from workers.engines.geometry import union_box

if TYPE_CHECKING:
    import pymupdf

# pymupdf is imported where a page is read, not here: ~0.5 CPU-s a process that reads no PDF (the
# embedded CLI on an image, a worker of the cpu queue) need not pay.

ENGINE_NAME = "pymupdf:text-layer"


@dataclass(frozen=True)
class TextLayerConfig:
    min_chars: int = 32
    # "auto" looks for tables only on pages with ruling lines; find_tables costs 0.1–1.5 s a page.
    tables: str = "auto"
    margin_share: float = 0.06


def has_text_layer(page: pymupdf.Page, min_chars: int) -> bool:
    """True when the page carries enough real text to skip OCR.

    A page whose text is mostly U+FFFD (fonts without a usable ToUnicode map) is treated as
    having no text layer, since extracting it would give garbage.
    """
    text = page.get_text("text")
    visible = [c for c in text if not c.isspace()]
    if len(visible) < min_chars:
        return False
    bad = sum(1 for c in visible if c == "\ufffd")
    return bad / len(visible) < 0.1


@dataclass(frozen=True)
class TextLayerPage:
    """A born-digital page read from its text layer.

    ``rotation``: how far (clockwise degrees, a quarter-turn) the page's text stands turned on the
    page as displayed (a table printed sideways: 90 or 270); the page is read in the frame where
    its text runs upright, and boxes come back on the page as displayed. ``verdict``: the
    conservation check of the regions against the page's words; ``flags`` say what the page had
    to give up to keep every word (``FLAG_TABLE_AS_TEXT``, ``FLAG_PAGE_AS_TEXT``), or that it
    could not (``FLAG_WORDS_LOST``).
    """

    regions: list[tuple[LayoutBox, RegionText]]
    rotation: int
    verdict: conservation.Verdict
    flags: tuple[str, ...] = ()


# A table whose grid would drop or repeat a word of the page is given back as plain text.
FLAG_TABLE_AS_TEXT = str(PageFlag.CONSERVATION_TABLE_AS_TEXT)
# Blocks and tables together still lost words: the page's words in reading order, one region a block.
FLAG_PAGE_AS_TEXT = str(PageFlag.CONSERVATION_PAGE_AS_TEXT)
# Even the page's own words could not be matched (a text layer PyMuPDF splits two ways).
FLAG_WORDS_LOST = str(PageFlag.CONSERVATION_WORDS_LOST)


def extract(page: pymupdf.Page, dpi: int, config: TextLayerConfig) -> list[tuple[LayoutBox, RegionText]]:
    """Text blocks as labelled regions (title, text, header, footer, table) with their text."""
    return read_page(page, dpi, config).regions


def read_page(page: pymupdf.Page, dpi: int, config: TextLayerConfig) -> TextLayerPage:
    """Regions of the page in reading order, every word of its text layer kept (checked)."""
    import pymupdf

    textpage = page.get_textpage(flags=pymupdf.TEXTFLAGS_TEXT)
    data = page.get_text("dict", textpage=textpage)
    raw_words = page.get_text("words", textpage=textpage)
    blocks = data["blocks"]  # the words' block numbers index this list
    text_blocks = [b for b in blocks if b.get("type") == 0]
    frame = _frame(page, text_blocks, dpi / 72.0)
    words = [_Word(*frame.upright(w[:4]), w[4], w[5], w[6], w[7]) for w in raw_words]

    found = _tables(page, config, frame, words)
    claimed: set[int] = set()
    table_words: list[list[_Word]] = []
    for bbox, _grid in found:
        mine = [k for k, w in enumerate(words) if k not in claimed and _centre_in(w, bbox)]
        claimed.update(mine)
        table_words.append([words[k] for k in mine])

    pieces: list[_Piece] = []
    for (bbox, grid), held in zip(found, table_words, strict=True):
        if held:
            pieces.append(_table_piece(bbox, grid, held))
    pieces += _block_pieces(blocks, words, claimed, frame)
    flags: list[str] = []
    verdict = conservation.check(raw_words, conservation.result_words(t for p in pieces for t in p.carried))
    if not verdict.held:
        # The grid builders are what can misplace a word: a table that does not hold exactly the
        # words inside it goes back to plain text, in reading order.
        kept = []
        for p in pieces:
            if p.words is not None and not _holds(p):
                kept.append(_text_piece(p.words, flag=FLAG_TABLE_AS_TEXT))
                flags.append(FLAG_TABLE_AS_TEXT)
            else:
                kept.append(p)
        pieces = kept
        verdict = conservation.check(raw_words, conservation.result_words(t for p in pieces for t in p.carried))
    if not verdict.held:
        by_block: dict[int, list[_Word]] = {}
        for w in words:
            by_block.setdefault(w.block, []).append(w)
        pieces = [_text_piece(ws, flag=FLAG_PAGE_AS_TEXT) for ws in by_block.values()]
        flags.append(FLAG_PAGE_AS_TEXT)
        verdict = conservation.check(raw_words, conservation.result_words(t for p in pieces for t in p.carried))
    if not verdict.held:
        flags.append(FLAG_WORDS_LOST)

    sizes = [s["size"] for b in text_blocks for line in b["lines"] for s in line["spans"] if s["text"].strip()]
    body = statistics.median(sizes) if sizes else 10.0
    order = reading_order([tuple(v * frame.scale for v in p.bbox) for p in pieces])
    regions = []
    for rank, k in enumerate(order):
        p = pieces[k]
        label = p.label or _label(p.bbox, p.size or body, p.bold, p.n_lines, body, frame.height, config.margin_share)
        box = LayoutBox(label=label, bbox=frame.shown(p.bbox), score=1.0, order=rank)
        regions.append((box, p.region_text(frame)))
    return TextLayerPage(regions, frame.rotation, verdict, tuple(dict.fromkeys(flags)))


@dataclass(frozen=True)
class _Word:
    """A word of the text layer in the upright frame (points), with its place in the layer."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    block: int
    line: int
    word: int


@dataclass(frozen=True)
class _Frame:
    """Coordinates in which the page's text reads left to right, top to bottom (points).

    Extraction reports boxes on the unrotated page; a page stored with /Rotate, or text drawn
    turned on the page (a landscape table printed sideways), reads upright only after a turn.
    Layout (blocks, tables, reading order) runs in this frame; boxes leave it for the page as
    displayed, like the rendered images of the OCR path.
    """

    up: pymupdf.Matrix  # unrotated page -> upright frame
    out: pymupdf.Matrix  # upright frame -> displayed page, in pixels
    scale: float
    width: float
    height: float
    rotation: int

    def upright(self, bbox) -> tuple[float, float, float, float]:
        import pymupdf

        return tuple((pymupdf.Rect(bbox) * self.up).normalize())

    def shown(self, bbox) -> tuple[float, float, float, float]:
        import pymupdf

        return tuple((pymupdf.Rect(bbox) * self.out).normalize())


def _frame(page: pymupdf.Page, blocks: list[dict], scale: float) -> _Frame:
    import pymupdf

    # The direction most of the page's characters run in, as a quarter-turn of the unrotated page.
    weight: dict[int, int] = {}
    for block in blocks:
        for line in block["lines"]:
            dx, dy = line["dir"]
            angle = round(math.degrees(math.atan2(dy, dx)) / 90) * 90 % 360
            weight[angle] = weight.get(angle, 0) + sum(len(s["text"].strip()) for s in line["spans"])
    angle = max(weight, key=lambda a: (weight[a], a == 0)) if weight else 0
    turn = pymupdf.Matrix(-angle)
    unrotated = (page.rect * page.derotation_matrix).normalize()
    turned = (unrotated * turn).normalize()
    up = turn * pymupdf.Matrix(1, 0, 0, 1, -turned.x0, -turned.y0)
    out = ~up * page.rotation_matrix * pymupdf.Matrix(scale, scale)
    return _Frame(up, out, scale, turned.width, turned.height, (angle + page.rotation) % 360)


@dataclass
class _Piece:
    """A region being built, in the upright frame: a block of text lines or a table."""

    bbox: tuple[float, float, float, float]
    lines: list[tuple[str, tuple]]  # (text, upright bbox)
    carried: list[str]  # what the result will carry of it, for the conservation check
    label: str | None = None
    size: float | None = None
    bold: bool = False
    flag: str | None = None
    grid: tables.Table | None = None
    words: list[_Word] | None = None  # a table's words, kept to fall back on

    @property
    def n_lines(self) -> int:
        return len(self.lines)

    def region_text(self, frame: _Frame) -> RegionText:
        lines = tuple(TextLine(text=t, bbox=frame.shown(b), confidence=1.0) for t, b in self.lines)
        flags = (self.flag,) if self.flag else ()
        if self.grid is None:
            return RegionText("\n".join(t for t, _ in self.lines), 1.0, lines, flags=flags)
        for cell in self.grid.cells:
            if cell.bbox is not None:
                cell.bbox = frame.shown(cell.bbox)
        table = tables.to_dict(self.grid)
        return RegionText(tables.region_text(self.grid), 1.0, lines, flags=flags, table=table)


def _holds(piece: _Piece) -> bool:
    """A table carries exactly the words inside it."""
    want = conservation.result_words(w.text for w in piece.words or [])
    return conservation.result_words(piece.carried) == want


def _table_piece(bbox, grid: tables.Table | None, held: list[_Word]) -> _Piece:
    if grid is None:
        grid = tables.grid_from_words(tables.phrases([_plain(w) for w in held]), min_gap=0.5)
    if grid is None:  # the words the box holds make no grid after all: they are plain text
        return _text_piece(held)
    piece = _Piece(bbox=bbox, lines=[], carried=[], label="table", grid=grid, words=held)
    piece.carried = [c.text for c in grid.cells] + [w.text for w in grid.caption] + [w.text for w in grid.notes]
    return piece


def _plain(w: _Word) -> tables.Word:
    return tables.Word(w.x0, w.y0, w.x1, w.y1, w.text)


def _block_pieces(blocks: list[dict], words: list[_Word], claimed: set[int], frame: _Frame) -> list[_Piece]:
    """Text blocks, less the words a table took: a block half inside a table keeps the rest."""
    import pymupdf

    by_line: dict[tuple[int, int], list[tuple[int, _Word]]] = {}
    for k, w in enumerate(words):
        by_line.setdefault((w.block, w.line), []).append((k, w))
    pieces = []
    for b, block in enumerate(blocks):
        if block.get("type") != 0:
            continue
        lines: list[tuple[str, tuple]] = []
        spans = []
        for n, line in enumerate(block["lines"]):
            mine = by_line.get((b, n), [])
            left = [w for k, w in mine if k not in claimed]
            if not left:
                continue
            if len(left) == len(mine):
                text = "".join(span["text"] for span in line["spans"]).strip()
                if text.split() != [w.text for w in left]:
                    text = " ".join(w.text for w in left)
                box = frame.upright(line["bbox"])
            else:
                text = " ".join(w.text for w in left)
                box = union_box([(w.x0, w.y0, w.x1, w.y1) for w in left])
            lines.append((text, box))
            spans += [s for s in line["spans"] if s["text"].strip()]
        if not lines:
            continue
        bold = bool(spans) and all(s["flags"] & pymupdf.TEXT_FONT_BOLD for s in spans)
        size = max((s["size"] for s in spans), default=None)
        bbox = union_box([box for _, box in lines])
        pieces.append(_Piece(bbox=bbox, lines=lines, carried=[t for t, _ in lines], size=size, bold=bold))
    return pieces


def _text_piece(held: list[_Word], *, flag: str | None = None) -> _Piece:
    """Words as plain text in reading order: lines top to bottom, words left to right."""
    height = statistics.median(w.y1 - w.y0 for w in held)
    lines: list[list[_Word]] = []
    for w in sorted(held, key=lambda w: (w.y0 + w.y1) / 2):
        if lines and abs((w.y0 + w.y1) / 2 - statistics.fmean((x.y0 + x.y1) / 2 for x in lines[-1])) < 0.45 * height:
            lines[-1].append(w)
        else:
            lines.append([w])
    out = [
        (" ".join(w.text for w in ws), union_box([(w.x0, w.y0, w.x1, w.y1) for w in ws]))
        for ws in (sorted(line, key=lambda w: w.x0) for line in lines)
    ]
    return _Piece(bbox=union_box([b for _, b in out]), lines=out, carried=[t for t, _ in out], label="text", flag=flag)


def carried_words(regions: list[tuple[LayoutBox, RegionText]]):
    """The words a page's regions carry into the result: a table's cells, caption and notes
    (its Markdown adds pipes and rules), every other region's text."""
    texts: list[str] = []
    for _box, text in regions:
        if text.table is not None:
            texts += [c["text"] for c in text.table["cells"]]
            texts += [text.table.get("caption", ""), text.table.get("notes", "")]
        else:
            texts.append(text.text)
    return conservation.result_words(texts)


def _label(bbox, size: float, bold: bool, n_lines: int, body: float, height: float, margin: float) -> str:
    top, bottom = bbox[1], bbox[3]
    if n_lines <= 2 and bottom < height * margin:
        return "header"
    if n_lines <= 2 and top > height * (1 - margin):
        return "footer"
    if n_lines <= 3 and (size >= body * 1.2 or (bold and size >= body)):
        return "title"
    return "text"


def _tables(
    page: pymupdf.Page, config: TextLayerConfig, frame: _Frame, words: list[_Word]
) -> list[tuple[tuple, tables.Table | None]]:
    """Table boxes in the upright frame, each with its grid (None: build it from its words)."""
    if config.tables == "off":
        return []
    h_rules, v_rules, n_rulings = _rulings(page, frame)
    if config.tables == "auto" and n_rulings < 6:
        return _whitespace_tables(words)
    # find_tables reads the page as displayed, and is not indifferent to turns (a table ruled
    # by horizontal rules only, shown sideways, came out as one row of twelve columns): it runs
    # with the page shown upright, so its boxes are in the upright frame.
    stored, shown_upright = page.rotation, (page.rotation - frame.rotation) % 360
    try:
        if shown_upright != stored:
            page.set_rotation(shown_upright)
        found = page.find_tables()
    except Exception:  # a malformed drawing stream must not fail the page; the text still comes out
        return []
    finally:
        if page.rotation != stored:
            page.set_rotation(stored)
    out = []
    for table in found.tables:
        if table.row_count < 2 or table.col_count < 2:
            continue
        bbox = tuple(table.bbox)
        inside = [w for w in words if _centre_in(w, bbox)]
        grid = tables.grid_from_words(
            tables.phrases([_plain(w) for w in inside]), h_rules=h_rules, v_rules=v_rules, min_gap=0.5
        )
        if grid is None:
            grid = _grid_from_cells(
                [[None if c is None else tuple(c) for c in row.cells] for row in table.rows], inside
            )
        if grid is not None:
            out.append((bbox, grid))
    return out


# A whitespace table: at least this many consecutive lines of at least this many short phrases.
_WS_MIN_LINES, _WS_MIN_PHRASES, _WS_MAX_PHRASE_CHARS = 3, 3, 40


def _whitespace_tables(words: list[_Word]) -> list[tuple[tuple, tables.Table | None]]:
    """Tables aligned by whitespace alone, on pages without ruling lines: runs of lines split
    into three or more short phrases by wide gaps, whose grid fills most of its cells. Prose in
    two columns gives two phrases a line, and columns of prose give long phrases, so neither
    makes a table."""
    found = tables.phrases([_plain(w) for w in words])
    if not found:
        return []
    height = statistics.median(w.h for w in found)
    lines: list[list[tables.Word]] = []
    for w in sorted(found, key=lambda w: w.cy):
        if lines and abs(w.cy - statistics.fmean(x.cy for x in lines[-1])) < 0.45 * height:
            lines[-1].append(w)
        else:
            lines.append([w])
    runs: list[list[list[tables.Word]]] = []
    current: list[list[tables.Word]] = []
    for line in lines:
        short = max(len(w.text) for w in line) <= _WS_MAX_PHRASE_CHARS
        near = bool(current) and min(w.y0 for w in line) - max(w.y1 for w in current[-1]) < 1.5 * height
        if short and len(line) >= _WS_MIN_PHRASES:
            if current and not near:
                runs.append(current)
                current = []
            current.append(line)
        elif short and near:
            current.append(line)  # a wrapped cell's next line
        else:
            if current:
                runs.append(current)
            current = []
    if current:
        runs.append(current)
    out = []
    for run in runs:
        if sum(len(l) >= _WS_MIN_PHRASES for l in run) < _WS_MIN_LINES:
            continue
        inside = [w for l in run for w in l]
        bbox = union_box([(w.x0, w.y0, w.x1, w.y1) for w in inside])
        grid = tables.grid_from_words(inside, min_gap=0.5)
        if grid is None or grid.n_cols < _WS_MIN_PHRASES or grid.caption or grid.notes:
            continue
        filled = sum(1 for c in grid.cells if c.text) / max(1, len(grid.cells))
        if filled < 0.6:
            continue
        out.append((bbox, None))  # rebuilt from the words the box holds, so none is left out
    return out


def _rulings(page: pymupdf.Page, frame: _Frame) -> tuple[list, list, int]:
    """Thin drawn lines and rectangles in the upright frame: horizontal ones (under group
    headings), vertical ones (between columns), and how many lines and rectangles were drawn."""
    import pymupdf

    h_rules, v_rules, n = [], [], 0
    for d in page.get_drawings():
        items = d["items"]
        n += sum(1 for item in items if item[0] in ("l", "re", "qu"))
        if _is_box(items):  # a rectangle drawn turned comes back as its four sides
            items = [("re", d["rect"])]
        for item in items:
            if item[0] == "l":
                r = pymupdf.Rect(item[1], item[2]).normalize()
            elif item[0] == "re":
                r = pymupdf.Rect(item[1]).normalize()
            elif item[0] == "qu":  # a rectangle drawn turned (a sideways table's rules)
                r = pymupdf.Quad(item[1]).rect
            else:
                continue
            r = (r * frame.up).normalize()
            if r.height <= 2 and r.width > 4:
                h_rules.append(tuple(r))
            elif r.width <= 2 and r.height > 4:
                v_rules.append(tuple(r))
    return h_rules, v_rules, n


def _is_box(items: list) -> bool:
    """Four straight sides, each horizontal or vertical, closing on themselves."""
    if len(items) != 4 or any(item[0] != "l" for item in items):
        return False
    straight = all(abs(a.x - b.x) < 0.5 or abs(a.y - b.y) < 0.5 for _, a, b in items)
    return straight and all(items[k][2] == items[(k + 1) % 4][1] for k in range(4))


def _grid_from_cells(cells: list[list[tuple | None]], words: list[_Word]) -> tables.Table | None:
    """find_tables' own cells filled with the page's words, or None when they would misquote
    the page.

    find_tables' own cell text can split a word ("0.965" came out as "0965" and "."), so each
    word of the text layer goes to the cell holding its centre instead. Where rulings mark only
    every few rows (a statistics table ruled every five states), one detected row holds several
    lines that line up across its cells: those become rows of their own. The table is used only
    if its cells hold exactly the words printed inside it; otherwise the page keeps its text
    blocks, so no word is lost or repeated.
    """
    placed: set[int] = set()
    rows: list[list[str]] = []
    for row in cells:
        held_row: list[list[_Word]] = []
        for cell in row:
            held = []
            if cell is not None:
                for k, w in enumerate(words):
                    if k not in placed and _centre_in(w, cell):
                        placed.add(k)
                        held.append(w)
            held_row.append(held)
        rows.extend(_split_stacked_rows(held_row))
    if len(placed) != len(words) or not rows:
        return None
    width = max(len(r) for r in rows)
    return tables.Table(
        len(rows),
        width,
        [
            tables.Cell(r, c, row[c] if c < len(row) else "", header=r == 0)
            for r, row in enumerate(rows)
            for c in range(width)
        ],
    )


def _split_stacked_rows(cells: list[list[_Word]]) -> list[list[str]]:
    bands = _line_bands([w for held in cells for w in held])
    # A band is a real row when it crosses at least two cells; a cell whose text merely wraps
    # has bands of its own that no other cell shares.
    if len(bands) > 1 and all(sum(1 for held in cells if any(_in_band(w, b) for w in held)) >= 2 for b in bands):
        return [[_cell_text([w for w in held if _in_band(w, b)]) for held in cells] for b in bands]
    return [[_cell_text(held) for held in cells]]


def _line_bands(words: list[_Word]) -> list[tuple[float, float]]:
    """Vertical extents of the text lines among ``words``, top to bottom."""
    bands: list[list[float]] = []
    for w in sorted(words, key=lambda w: (w.y0 + w.y1) / 2):
        cy = (w.y0 + w.y1) / 2
        if bands and cy - bands[-1][1] < 0.5 * (w.y1 - w.y0):
            bands[-1][1] = max(bands[-1][1], w.y1)
            continue
        bands.append([w.y0, w.y1])
    return [(b[0], b[1]) for b in bands]


def _in_band(w: _Word, band: tuple[float, float]) -> bool:
    return band[0] <= (w.y0 + w.y1) / 2 <= band[1]


def _cell_text(held: list[_Word]) -> str:
    ordered = sorted(held, key=lambda w: (w.block, w.line, w.word))  # the PDF's own order
    return " ".join(w.text for w in ordered)


def _centre_in(w: _Word, box) -> bool:
    x0, y0, x1, y1 = box
    cx, cy = (w.x0 + w.x1) / 2, (w.y0 + w.y1) / 2
    return x0 <= cx <= x1 and y0 <= cy <= y1
