"""Born-digital pages: regions and words straight from the PDF's text layer (PyMuPDF).

No rendering and no OCR: this path is the fast lane. Boxes are returned in page pixels at the
``dpi`` the caller names, so text-layer and OCR pages share one coordinate convention.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pymupdf

from workers.content import tables
from workers.engines.base import LayoutBox, RegionText, TextLine
from workers.engines.geometry import best_container

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


def extract(page: pymupdf.Page, dpi: int, config: TextLayerConfig) -> list[tuple[LayoutBox, RegionText]]:
    """Text blocks as labelled regions (title, text, header, footer, table) with their text."""
    scale = dpi / 72.0
    # Extraction reports boxes on the unrotated page; regions live on the page as displayed
    # (a landscape page stored with /Rotate), like the rendered images of the OCR path.
    shown = page.rotation_matrix
    data = page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT)
    blocks = [b for b in data["blocks"] if b.get("type") == 0]
    sizes = [span["size"] for b in blocks for line in b["lines"] for span in line["spans"] if span["text"].strip()]
    body = statistics.median(sizes) if sizes else 10.0
    height = page.rect.height

    tables = _tables(page, config, scale)
    table_boxes = [t[0] for t in tables]
    table_lines: list[list[TextLine]] = [[] for _ in tables]

    regions: list[tuple[LayoutBox, RegionText]] = []
    for block in blocks:
        lines = []
        for line in block["lines"]:
            text = "".join(span["text"] for span in line["spans"]).strip()
            if text:
                lines.append(TextLine(text=text, bbox=_px(line["bbox"], scale, shown), confidence=1.0))
        if not lines:
            continue
        bbox = _px(block["bbox"], scale, shown)
        holder = best_container(bbox, table_boxes)
        if holder is not None:
            table_lines[holder].extend(lines)
            continue
        spans = [s for line in block["lines"] for s in line["spans"] if s["text"].strip()]
        bold = all(s["flags"] & pymupdf.TEXT_FONT_BOLD for s in spans)
        size = max(s["size"] for s in spans)
        label = _label(_px(block["bbox"], 1.0, shown), size, bold, len(lines), body, height, config.margin_share)
        text = "\n".join(line.text for line in lines)
        regions.append((LayoutBox(label=label, bbox=bbox, score=1.0), RegionText(text, 1.0, tuple(lines))))

    for (bbox, markdown, grid), lines in zip(tables, table_lines, strict=True):
        text = markdown or "\n".join(line.text for line in lines)
        regions.append(
            (LayoutBox(label="table", bbox=bbox, score=1.0), RegionText(text, 1.0, tuple(lines), table=grid))
        )
    return regions


def page_words(page: pymupdf.Page) -> list[str]:
    return [w[4] for w in page.get_text("words")]


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
    page: pymupdf.Page, config: TextLayerConfig, scale: float
) -> list[tuple[tuple[float, float, float, float], str, dict | None]]:
    if config.tables == "off":
        return []
    if config.tables == "auto":
        rulings = sum(1 for d in page.get_drawings() for item in d["items"] if item[0] in ("l", "re"))
        if rulings < 6:
            return _whitespace_tables(page, scale)
    try:
        found = page.find_tables()
    except Exception:  # a malformed drawing stream must not fail the page; the text still comes out
        return []
    words = page.get_text("words")
    h_rules, v_rules = _rulings(page)
    out = []
    for table in found.tables:
        if table.row_count < 2 or table.col_count < 2:
            continue
        grid = _grid(table.bbox, words, h_rules, v_rules, scale, page.rotation_matrix)
        if grid is not None:
            out.append((_px(table.bbox, scale, page.rotation_matrix), *grid))
            continue
        rows = _table_rows(table, words)
        if rows is None:
            continue  # its words stay in ordinary text blocks
        out.append((_px(table.bbox, scale, page.rotation_matrix), _markdown_table(rows), None))
    return out


# A whitespace table: at least this many consecutive lines of at least this many short phrases.
_WS_MIN_LINES, _WS_MIN_PHRASES, _WS_MAX_PHRASE_CHARS = 3, 3, 40


def _whitespace_tables(page: pymupdf.Page, scale: float) -> list[tuple[tuple, str, dict | None]]:
    """Tables aligned by whitespace alone, on pages without ruling lines: runs of lines split
    into three or more short phrases by wide gaps, whose grid fills most of its cells. Prose in
    two columns gives two phrases a line, and columns of prose give long phrases, so neither
    makes a table."""
    # On the page as displayed (a page stored with /Rotate has its lines across the stored axes).
    shown = page.rotation_matrix
    displayed = [(pymupdf.Rect(w[:4]) * shown).normalize() for w in page.get_text("words")]
    found = tables.phrases(
        [tables.Word(r.x0, r.y0, r.x1, r.y1, w[4]) for r, w in zip(displayed, page.get_text("words"), strict=True)]
    )
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
        x0, y0 = min(w.x0 for w in inside), min(w.y0 for w in inside)
        x1, y1 = max(w.x1 for w in inside), max(w.y1 for w in inside)
        grid = tables.grid_from_words(inside, min_gap=0.5)
        if grid is None or grid.n_cols < _WS_MIN_PHRASES or grid.caption or grid.notes:
            continue
        filled = sum(1 for c in grid.cells if c.text) / max(1, len(grid.cells))
        if filled < 0.6:
            continue
        for cell in grid.cells:
            if cell.bbox is not None:
                cell.bbox = tuple(v * scale for v in cell.bbox)
        out.append((tuple(v * scale for v in (x0, y0, x1, y1)), tables.to_markdown(grid), tables.to_dict(grid)))
    return out


def _rulings(page: pymupdf.Page) -> tuple[list, list]:
    """Thin drawn lines and rectangles: horizontal ones (under group headings) and vertical
    ones (between columns)."""
    h_rules, v_rules = [], []
    for d in page.get_drawings():
        for item in d["items"]:
            if item[0] == "l":
                r = pymupdf.Rect(item[1], item[2]).normalize()
            elif item[0] == "re":
                r = pymupdf.Rect(item[1]).normalize()
            else:
                continue
            if r.height <= 2 and r.width > 4:
                h_rules.append(tuple(r))
            elif r.width <= 2 and r.height > 4:
                v_rules.append(tuple(r))
    return h_rules, v_rules


def _grid(bbox, words, h_rules, v_rules, scale: float, shown) -> tuple[str, dict] | None:
    """The table's grid rebuilt from the words printed inside it (``tables.grid_from_words``):
    every word lands in exactly one cell, so the table quotes the page."""
    inside = [tables.Word(*w[:5]) for w in words if _centre_in(w, bbox)]
    grid = tables.grid_from_words(tables.phrases(inside), h_rules=h_rules, v_rules=v_rules, min_gap=0.5)
    if grid is None:
        return None
    for cell in grid.cells:
        if cell.bbox is not None:
            cell.bbox = _px(cell.bbox, scale, shown)
    return tables.region_text(grid), tables.to_dict(grid)


def _table_rows(table, words: list[tuple]) -> list[list[str]] | None:
    """Cell texts built from the page's words, or None when the table would misquote the page.

    find_tables' own cell text can split a word ("0.965" came out as "0965" and "."), so each
    word of the text layer goes to the cell holding its centre instead. Where rulings mark only
    every few rows (a statistics table ruled every five states), one detected row holds several
    lines that line up across its cells: those become rows of their own. The table is used only
    if its cells hold exactly the words printed inside it; otherwise the page keeps its text
    blocks, so no word is lost or repeated.
    """
    inside = [w for w in words if _centre_in(w, table.bbox)]
    placed: set[int] = set()
    rows: list[list[str]] = []
    for row in table.rows:
        cells: list[list[tuple]] = []
        for cell in row.cells:
            held = []
            if cell is not None:
                for k, w in enumerate(inside):
                    if k not in placed and _centre_in(w, cell):
                        placed.add(k)
                        held.append(w)
            cells.append(held)
        rows.extend(_split_stacked_rows(cells))
    if len(placed) != len(inside) or not rows:
        return None
    return rows


def _split_stacked_rows(cells: list[list[tuple]]) -> list[list[str]]:
    bands = _line_bands([w for held in cells for w in held])
    # A band is a real row when it crosses at least two cells; a cell whose text merely wraps
    # has bands of its own that no other cell shares.
    if len(bands) > 1 and all(sum(1 for held in cells if any(_in_band(w, b) for w in held)) >= 2 for b in bands):
        return [[_cell_text([w for w in held if _in_band(w, b)]) for held in cells] for b in bands]
    return [[_cell_text(held) for held in cells]]


def _line_bands(words: list[tuple]) -> list[tuple[float, float]]:
    """Vertical extents of the text lines among ``words``, top to bottom."""
    bands: list[list[float]] = []
    for w in sorted(words, key=lambda w: (w[1] + w[3]) / 2):
        cy = (w[1] + w[3]) / 2
        if bands and cy - bands[-1][1] < 0.5 * (w[3] - w[1]):
            bands[-1][1] = max(bands[-1][1], w[3])
            continue
        bands.append([w[1], w[3]])
    return [(b[0], b[1]) for b in bands]


def _in_band(w: tuple, band: tuple[float, float]) -> bool:
    return band[0] <= (w[1] + w[3]) / 2 <= band[1]


def _cell_text(held: list[tuple]) -> str:
    ordered = sorted(held, key=lambda w: (w[5], w[6], w[7]))  # block, line, word: the PDF's own order
    return " ".join(w[4] for w in ordered).replace("|", "\\|")


def _centre_in(w: tuple, box) -> bool:
    x0, y0, x1, y1 = box
    cx, cy = (w[0] + w[2]) / 2, (w[1] + w[3]) / 2
    return x0 <= cx <= x1 and y0 <= cy <= y1


def _markdown_table(rows: list[list[str]]) -> str:
    width = max(len(r) for r in rows)
    rows = [r + [""] * (width - len(r)) for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


def _px(bbox, scale: float, shown: pymupdf.Matrix) -> tuple[float, float, float, float]:
    r = (pymupdf.Rect(bbox) * shown).normalize()
    return (r.x0 * scale, r.y0 * scale, r.x1 * scale, r.y1 * scale)
