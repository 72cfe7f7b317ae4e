"""Born-digital pages: regions and words straight from the PDF's text layer (PyMuPDF).

No rendering and no OCR: this path is the fast lane. Boxes are returned in page pixels at the
``dpi`` the caller names, so text-layer and OCR pages share one coordinate convention.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import pymupdf

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
                lines.append(TextLine(text=text, bbox=_px(line["bbox"], scale), confidence=1.0))
        if not lines:
            continue
        bbox = _px(block["bbox"], scale)
        holder = best_container(bbox, table_boxes)
        if holder is not None:
            table_lines[holder].extend(lines)
            continue
        spans = [s for line in block["lines"] for s in line["spans"] if s["text"].strip()]
        bold = all(s["flags"] & pymupdf.TEXT_FONT_BOLD for s in spans)
        size = max(s["size"] for s in spans)
        label = _label(block["bbox"], size, bold, len(lines), body, height, config.margin_share)
        text = "\n".join(line.text for line in lines)
        regions.append((LayoutBox(label=label, bbox=bbox, score=1.0), RegionText(text, 1.0, tuple(lines))))

    for (bbox, markdown), lines in zip(tables, table_lines, strict=True):
        text = markdown or "\n".join(line.text for line in lines)
        regions.append((LayoutBox(label="table", bbox=bbox, score=1.0), RegionText(text, 1.0, tuple(lines))))
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


def _tables(page: pymupdf.Page, config: TextLayerConfig, scale: float) -> list[tuple[tuple[float, float, float, float], str]]:
    if config.tables == "off":
        return []
    if config.tables == "auto":
        rulings = sum(1 for d in page.get_drawings() for item in d["items"] if item[0] in ("l", "re"))
        if rulings < 6:
            return []
    try:
        found = page.find_tables()
    except Exception:  # a malformed drawing stream must not fail the page; the text still comes out
        return []
    return [
        (_px(table.bbox, scale), table.to_markdown(clean=False).strip())
        for table in found.tables
        if table.row_count >= 2 and table.col_count >= 2
    ]


def _px(bbox, scale: float) -> tuple[float, float, float, float]:
    x0, y0, x1, y1 = bbox
    return (x0 * scale, y0 * scale, x1 * scale, y1 * scale)
