"""Table structure: one shape for every path, built from positioned words or parsed from markup.

A ``Table`` is rows × columns of cells, each with its text, its box (page pixels; ``None`` when
the source had no geometry, as a VLM's HTML) and its row/column spans. The text layer, the CPU
OCR path and the VLM path all produce it; the JSON result carries it (``to_dict``) and the
Markdown shows it as a pipe table, or as HTML when a cell spans rows or columns (Markdown
cannot say that).

``grid_from_words`` recovers a grid from words alone (OCR'd lines of a scanned table region):
rows from the words' vertical centres, columns from the vertical whitespace the body rows leave
free, and optional ruling lines. Pure: no Django, no engines.
"""

from __future__ import annotations

import html
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Word:
    x0: float
    y0: float
    x1: float
    y1: float
    text: str

    @property
    def cx(self) -> float:
        return (self.x0 + self.x1) / 2

    @property
    def cy(self) -> float:
        return (self.y0 + self.y1) / 2

    @property
    def h(self) -> float:
        return max(1e-6, self.y1 - self.y0)


@dataclass
class Cell:
    row: int
    col: int
    text: str
    bbox: Box | None = None
    rowspan: int = 1
    colspan: int = 1
    header: bool = False


@dataclass
class Table:
    n_rows: int
    n_cols: int
    cells: list[Cell] = field(default_factory=list)
    # Words above the grid that title it (kept apart so the caller can emit them as a caption).
    caption: list[Word] = field(default_factory=list)
    notes: list[Word] = field(default_factory=list)  # running text under the grid

    @property
    def has_spans(self) -> bool:
        return any(c.rowspan > 1 or c.colspan > 1 for c in self.cells)

    @property
    def header_rows(self) -> int:
        rows = {c.row for c in self.cells if c.header}
        n = 0
        while n in rows:
            n += 1
        return n

    def words(self) -> str:
        return " ".join(c.text for c in sorted(self.cells, key=lambda c: (c.row, c.col)) if c.text)


# --- output -----------------------------------------------------------------------------------


def to_dict(table: Table) -> dict:
    """The JSON shape: ``{"rows", "cols", "header_rows", "cells": [{row, col, rowspan, colspan,
    text, bbox, header}]}``, cells in row-major order, plus ``caption`` and ``notes`` (the words
    above and under the grid) when the table has them, so the cells and these two carry every
    word of the region."""
    extra = {
        key: " ".join(w.text for w in words)
        for key, words in (("caption", table.caption), ("notes", table.notes))
        if words
    }
    return {
        **extra,
        "rows": table.n_rows,
        "cols": table.n_cols,
        "header_rows": table.header_rows,
        "cells": [
            {
                "row": c.row,
                "col": c.col,
                "rowspan": c.rowspan,
                "colspan": c.colspan,
                "text": c.text,
                "bbox": [round(v, 2) for v in c.bbox] if c.bbox else None,
                "header": c.header,
            }
            for c in sorted(table.cells, key=lambda c: (c.row, c.col))
        ],
    }


def from_dict(data: dict) -> Table:
    cells = [
        Cell(
            row=c["row"],
            col=c["col"],
            text=c.get("text", ""),
            bbox=tuple(c["bbox"]) if c.get("bbox") else None,
            rowspan=c.get("rowspan", 1),
            colspan=c.get("colspan", 1),
            header=c.get("header", False),
        )
        for c in data.get("cells", [])
    ]
    return Table(data["rows"], data["cols"], cells)


def region_text(table: Table) -> str:
    """A table region's text: its title, the grid (``to_markdown``) and notes under it, as
    paragraphs, so every word the region holds is in it once."""
    parts = [" ".join(w.text for w in table.caption), to_markdown(table), " ".join(w.text for w in table.notes)]
    return "\n\n".join(p for p in parts if p)


def to_markdown(table: Table) -> str:
    """A pipe table; HTML when a cell spans (a pipe table would have to repeat or drop it)."""
    if table.has_spans:
        return to_html(table)
    grid = [[""] * table.n_cols for _ in range(table.n_rows)]
    for c in table.cells:
        grid[c.row][c.col] = _md_cell(c.text)
    lines = ["| " + " | ".join(grid[0]) + " |", "|" + "---|" * table.n_cols]
    lines += ["| " + " | ".join(r) + " |" for r in grid[1:]]
    return "\n".join(lines)


def to_html(table: Table, *, th: bool = True) -> str:
    """HTML with ``<thead>`` for header rows. ``th=False`` writes header cells as ``<td>``, the
    PubTabNet convention the TEDS metric expects."""
    by_row: dict[int, list[Cell]] = {}
    for c in table.cells:
        by_row.setdefault(c.row, []).append(c)
    head_n = table.header_rows
    out = ["<table>"]
    for section, rows in (("thead", range(head_n)), ("tbody", range(head_n, table.n_rows))):
        if not rows:
            continue
        out.append(f"<{section}>")
        for r in rows:
            parts = []
            for c in sorted(by_row.get(r, []), key=lambda c: c.col):
                tag = "th" if th and c.header else "td"
                attrs = (f' rowspan="{c.rowspan}"' if c.rowspan > 1 else "") + (
                    f' colspan="{c.colspan}"' if c.colspan > 1 else ""
                )
                parts.append(f"<{tag}{attrs}>{html.escape(c.text, quote=False)}</{tag}>")
            out.append("<tr>" + "".join(parts) + "</tr>")
        out.append(f"</{section}>")
    out.append("</table>")
    return "".join(out)


def _md_cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


# --- parsing markup (what a VLM answers) -------------------------------------------------------


class _HtmlTable(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[tuple[str, int, int, bool]]] = []
        self.header_section = False
        self.cell: list[str] | None = None
        self.cell_attrs: tuple[int, int, bool] = (1, 1, False)
        self.tables = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.tables += 1
        elif self.tables != 1:
            return  # a nested table stays text of its cell
        elif tag == "thead":
            self.header_section = True
        elif tag == "tbody":
            self.header_section = False
        elif tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            if not self.rows:
                self.rows.append([])
            self.cell = []
            self.cell_attrs = (_span(a.get("rowspan")), _span(a.get("colspan")), tag == "th" or self.header_section)
        elif tag == "br" and self.cell is not None:
            self.cell.append(" ")

    def handle_endtag(self, tag):
        if tag == "table":
            self.tables -= 1
        elif tag in ("td", "th") and self.cell is not None:
            text = " ".join("".join(self.cell).split())
            self.rows[-1].append((text, *self.cell_attrs))
            self.cell = None
        elif tag == "thead":
            self.header_section = False

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def _span(value: str | None) -> int:
    try:
        return max(1, min(int(value or 1), 1000))
    except ValueError:
        return 1


def parse_html(text: str) -> Table | None:
    """The first ``<table>`` of ``text`` as a Table, spans placed as a browser would place them."""
    parser = _HtmlTable()
    parser.feed(text)
    parser.close()
    rows = [r for r in parser.rows if r]
    if not rows:
        return None
    taken: set[tuple[int, int]] = set()
    cells: list[Cell] = []
    for r, row in enumerate(rows):
        col = 0
        for text_, rowspan, colspan, header in row:
            while (r, col) in taken:
                col += 1
            rowspan = min(rowspan, len(rows) - r)
            for dr in range(rowspan):
                for dc in range(colspan):
                    taken.add((r + dr, col + dc))
            cells.append(Cell(r, col, text_, None, rowspan, colspan, header))
            col += colspan
    n_cols = max(c for _, c in taken) + 1
    return Table(len(rows), n_cols, cells)


_MD_SEPARATOR = re.compile(r"^\|?(\s*:?-+:?\s*\|)+\s*(:?-+:?)?\s*$")


def parse_markdown(text: str) -> Table | None:
    """A pipe table: its first row is the header; ragged rows are padded."""
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    if len(lines) < 2 or not _MD_SEPARATOR.match(lines[1]):
        return None
    rows = [_md_row(l) for l in [lines[0], *lines[2:]]]
    n_cols = max(len(r) for r in rows)
    cells = [
        Cell(r, c, row[c] if c < len(row) else "", None, header=(r == 0))
        for r, row in enumerate(rows)
        for c in range(n_cols)
    ]
    return Table(len(rows), n_cols, cells)


def _md_row(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    return [p.strip().replace("\\|", "|") for p in re.split(r"(?<!\\)\|", line)]


def parse_markup(text: str) -> Table | None:
    """HTML or Markdown, whichever the text is."""
    if "<table" in text.lower():
        return parse_html(text)
    return parse_markdown(text)


# --- grids from positioned words ---------------------------------------------------------------


def grid_from_words(
    words: Sequence[Word],
    *,
    h_rules: Sequence[Box] = (),
    v_rules: Sequence[Box] = (),
    min_gap: float = 0.3,
) -> Table | None:
    """Rows and columns of a table region from the words (or OCR lines) inside it.

    Rows: words whose vertical centres lie within ~half a text height share a line; a line that
    sits between two others with no column in common with them (a value centred across two
    sub-rows) joins both, and a line whose first column is empty continues the row above (a
    wrapped cell). Columns: the x-ranges that the body rows' words cover, separated by gaps
    that (almost) no body row crosses, or by a vertical ruling line. Header rows are those above
    the first row that holds a number; a header word wider than one column, or standing over a
    ruling line that runs under several columns, spans them. ``min_gap`` (in text heights) is the
    narrowest gap that separates columns: OCR lines hold whole phrases, so it can be small; the
    text layer's single words need it wider than a space. None when no grid of at least 2 × 2
    is found.
    """
    words = [w for w in words if w.text.strip()]
    if len(words) < 4:
        return None
    height = statistics.median(w.h for w in words)
    lines = _lines(words, height)
    # Leading lines of one phrase over a table of several columns are its title, not a row.
    caption: list[Word] = []
    while len(lines) > 2 and len(lines[0]) == 1 and max(len(l) for l in lines) >= 3:
        caption.extend(lines.pop(0))
    # Trailing lines of running text (notes under the table) are not rows either.
    notes: list[Word] = []
    widest = max(len(l) for l in lines)
    while (
        len(lines) > 2
        and len(lines[-1]) <= max(2, widest // 3)
        and (widest >= 6 or any(len(w.text) > 40 for w in lines[-1]))
    ):
        notes[:0] = lines.pop()
    if len(lines) < 2:
        return None
    header_n = _header_count(lines)
    body = [w for line in lines[header_n:] for w in line] or words
    columns = _columns(body, len(lines) - header_n, height, v_rules, min_gap)
    if len(columns) < 2:
        return None
    rows, tall = _rows(lines, header_n, columns)
    header_n -= len(lines[:header_n]) - len([r for r in rows[:header_n] if r])
    rows = [r for r in rows if r]
    if len(rows) < 2:
        return None
    table = _place(rows, header_n if header_n < len(rows) else 0, columns, height, (h_rules, v_rules), tall)
    table.caption = caption
    table.notes = notes
    return table


def _lines(words: Sequence[Word], height: float) -> list[list[Word]]:
    lines: list[list[Word]] = []
    for w in sorted(words, key=lambda w: w.cy):
        if lines:
            last = lines[-1]
            if abs(w.cy - statistics.fmean(x.cy for x in last)) < 0.45 * height:
                last.append(w)
                continue
        lines.append([w])
    return [sorted(line, key=lambda w: w.x0) for line in lines]


_NUMBER = re.compile(r"^[-+(]?[$€£]?\d[\d,.\s]*%?\)?$")


def _is_number(text: str) -> bool:
    return bool(_NUMBER.match(text.strip()))


def _header_count(lines: list[list[Word]]) -> int:
    """Lines above the first one holding a number (at most 3); 1 when no line holds one."""
    for i, line in enumerate(lines[:4]):
        if sum(_is_number(w.text) for w in line) >= 0.4 * len(line):
            return min(i, 3) if i > 0 else 0
    return 1


def _columns(
    body: Sequence[Word], n_rows: int, height: float, v_rules: Sequence[Box], min_gap: float
) -> list[tuple[float, float]]:
    """Column x-ranges: where body words stand, split at gaps that no more than a tenth of the
    body rows cross (a long cell may cross a gap; a column gap is one the rows leave free) and
    at vertical ruling lines."""
    x0 = min(w.x0 for w in body)
    x1 = max(w.x1 for w in body)
    step = max(0.1, height / 20)
    n = int((x1 - x0) / step) + 2
    cover = [0] * n
    for w in body:
        for k in range(int((w.x0 - x0) / step), int((w.x1 - x0) / step) + 1):
            cover[k] += 1
    segments = _covered(cover, int(0.1 * n_rows), x0, step)
    # A column filled in few rows (a total row only) is still a column where no other is.
    segments += [s for s in _covered(cover, 0, x0, step) if not any(s[0] < t[1] and t[0] < s[1] for t in segments)]
    segments.sort()
    # Narrow gaps are spaces between words of one cell, unless a ruling line stands in them.
    rules = sorted((r[0] + r[2]) / 2 for r in v_rules)
    columns = [segments[0]] if segments else []
    for seg in segments[1:]:
        gap_ruled = any(columns[-1][1] - step <= x <= seg[0] + step for x in rules)
        if seg[0] - columns[-1][1] < min_gap * height and not gap_ruled:
            columns[-1][1] = seg[1]
        else:
            columns.append(seg)
    return [(a, b) for a, b in columns]


def _covered(cover: list[int], limit: int, x0: float, step: float) -> list[list[float]]:
    segments: list[list[float]] = []
    for k, n in enumerate(cover):
        if n > limit:
            x = x0 + k * step
            if segments and segments[-1][1] >= x - step / 2:
                segments[-1][1] = x + step
            else:
                segments.append([x, x + step])
    return segments


def _col_of(w: Word, columns: Sequence[tuple[float, float]]) -> int:
    best, best_d = 0, float("inf")
    for i, (a, b) in enumerate(columns):
        d = 0.0 if a <= w.cx <= b else min(abs(w.cx - a), abs(w.cx - b))
        if d < best_d:
            best, best_d = i, d
    return best


def _rows(lines: list[list[Word]], header_n: int, columns) -> tuple[list[list[Word]], set[int]]:
    """Body lines grouped into rows (straddling and wrapped lines joined). In the header a line
    standing between two others in columns they leave empty (a heading centred on two header
    lines) joins the line above and its words span both rows (``tall``, by ``id``)."""
    head = [list(l) for l in lines[:header_n]]
    tall: set[int] = set()
    for i in range(1, len(head) - 1):
        hc = [{_col_of(w, columns) for w in line} for line in head]
        if head[i] and not (hc[i] & hc[i - 1]) and not (hc[i] & hc[i + 1]):
            tall |= {id(w) for w in head[i]}
            head[i - 1].extend(head[i])
            head[i] = []
    body = [list(l) for l in lines[header_n:]]
    cols = [{_col_of(w, columns) for w in line} for line in body]
    # A line between two others, sharing no column with either and overlapping both vertically
    # (a value centred across two sub-rows): the three are one row.
    i = 1
    while i < len(body) - 1:
        above, mid, below = body[i - 1], body[i], body[i + 1]
        overlaps = min(w.y0 for w in mid) < max(w.y1 for w in above) and max(w.y1 for w in mid) > min(
            w.y0 for w in below
        )
        if overlaps and not (cols[i] & cols[i - 1]) and not (cols[i] & cols[i + 1]):
            body[i - 1 : i + 2] = [above + mid + below]
            cols[i - 1 : i + 2] = [cols[i - 1] | cols[i] | cols[i + 1]]
            continue
        i += 1
    # A line that leaves the first column and most others empty, and holds no number, continues
    # the row above (a cell that wraps).
    rows: list[list[Word]] = []
    row_cols: list[set[int]] = []
    for line, c in zip(body, cols, strict=True):
        wrapped = 0 not in c and len(c) <= len(columns) / 2 and not any(_is_number(w.text) for w in line)
        if rows and wrapped and 0 in row_cols[-1]:
            rows[-1].extend(line)
            row_cols[-1] |= c
        else:
            rows.append(line)
            row_cols.append(set(c))
    return head + rows, tall


def _place(rows: list[list[Word]], header_n: int, columns, height: float, rules, tall: set[int]) -> Table:
    h_rules, v_rules = rules
    n_cols = len(columns)
    cells: list[Cell] = []
    covered: set[tuple[int, int]] = set()  # grid positions taken by a cell spanning down
    for r, row in enumerate(rows):
        held: dict[int, list[Word]] = {}
        for w in row:
            held.setdefault(_col_of(w, columns), []).append(w)
        spans = {c: c for c in held}
        if r < header_n:
            for c, ws in list(held.items()):
                if c not in held:
                    continue
                first, last = _header_extent(ws, columns, height, h_rules)
                spans[c] = max(spans[c], last)
                if first < c:
                    spans[first] = max(spans.get(first, first), spans.pop(c))
                    held[first] = held.get(first, []) + held.pop(c)
            if r + 1 < header_n:
                _widen_group_headings(held, spans, columns, row, v_rules)
        c = 0
        while c < n_cols:
            end = spans.get(c, c)
            # Words of later columns inside a span join the spanning cell.
            for k in range(c + 1, end + 1):
                held.setdefault(c, []).extend(held.pop(k, []))
                end = max(end, spans.pop(k, k))
            ws = held.get(c, [])
            if (r, c) in covered and not ws:
                c += 1
                continue
            down = 2 if ws and r + 1 < header_n and all(id(w) in tall for w in ws) else 1
            if down == 2:
                covered.update((r + 1, k) for k in range(c, end + 1))
            cells.append(Cell(r, c, _text(ws, height), _union(ws), down, end - c + 1, r < header_n))
            c = end + 1
    return Table(len(rows), n_cols, cells)


def _widen_group_headings(held, spans, columns, row, v_rules) -> None:
    """A heading above a further header line, centred over empty neighbours, spans the widest
    run of empty columns it is centred on, without crossing a vertical ruling line."""
    width = statistics.median(b - a for a, b in columns)
    for c in sorted(held):
        if c not in spans:
            continue
        ws = held[c]
        centre = (min(w.x0 for w in ws) + max(w.x1 for w in ws)) / 2
        best = (c, spans[c])
        for a in range(c, -1, -1):
            if a < c and (a in held or _ruled(columns[a][1], columns[a + 1][0], row, v_rules)):
                break
            for b in range(spans[c], len(columns)):
                if b > spans[c] and (b in held or _ruled(columns[b - 1][1], columns[b][0], row, v_rules)):
                    break
                mid = (columns[a][0] + columns[b][1]) / 2
                if abs(mid - centre) <= 0.5 * width and b - a > best[1] - best[0]:
                    best = (a, b)
        if best[0] < c:
            held[best[0]] = held.pop(c)
            spans.pop(c)
        spans[best[0]] = best[1]


def _ruled(left: float, right: float, row: Sequence[Word], v_rules: Sequence[Box]) -> bool:
    """A vertical ruling line stands in the gap between two columns at this row's height."""
    top, bottom = min(w.y0 for w in row), max(w.y1 for w in row)
    return any(left - 1 <= (r[0] + r[2]) / 2 <= right + 1 and r[1] <= bottom and r[3] >= top for r in v_rules)


def _header_extent(ws: Sequence[Word], columns, height: float, h_rules: Sequence[Box]) -> tuple[int, int]:
    """Columns header words cover: those they overlap by most of their width, or those a
    ruling line just under them spans (a group heading over its sub-columns)."""
    left, right = min(w.x0 for w in ws), max(w.x1 for w in ws)
    bottom, centre = max(w.y1 for w in ws), (left + right) / 2
    span = max(b for _, b in columns) - min(a for a, _ in columns)
    for rule in h_rules:
        partial = rule[2] - rule[0] < 0.9 * span  # a rule across the whole table closes the header
        if partial and 0 <= rule[1] - bottom <= 0.6 * height and rule[0] <= centre <= rule[2]:
            left, right = min(left, rule[0]), max(right, rule[2])
    covered = [
        i for i, (a, b) in enumerate(columns) if min(b, right) - max(a, left) >= 0.5 * min(b - a, right - left + 1e-6)
    ]
    if not covered:
        k = _col_of(ws[0], columns)
        return k, k
    return min(covered), max(covered)


def _text(ws: Sequence[Word], height: float) -> str:
    lines = _lines(ws, height) if ws else []
    return " ".join(w.text for line in lines for w in line)


def _union(ws: Sequence[Word]) -> Box | None:
    if not ws:
        return None
    return (min(w.x0 for w in ws), min(w.y0 for w in ws), max(w.x1 for w in ws), max(w.y1 for w in ws))


def phrases(words: Sequence[Word], gap: float = 0.5) -> list[Word]:
    """Words of one line closer than ``gap`` text heights joined into phrases ("Long Gun"): the
    text layer gives single words, and a space must not look like a column gap."""
    if not words:
        return []
    height = statistics.median(w.h for w in words)
    out: list[Word] = []
    for line in _lines(words, height):
        current: Word | None = None
        for w in line:
            if current is not None and w.x0 - current.x1 < gap * max(height, min(w.h, current.h)):
                current = Word(
                    current.x0,
                    min(current.y0, w.y0),
                    max(current.x1, w.x1),
                    max(current.y1, w.y1),
                    f"{current.text} {w.text}",
                )
            else:
                if current is not None:
                    out.append(current)
                current = w
        if current is not None:
            out.append(current)
    return out
