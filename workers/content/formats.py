"""Markdown and JSON from a finished job's pages. Pure: plain dicts in, strings out.

Input shape, one dict a page (regions already in reading order)::

    {"index", "width", "height", "dpi", "width_pt", "height_pt", "source", "rotation", "flags",
     "confidence", "script", "regions": [{"order", "label", "bbox": (x0, y0, x1, y1), "polygon", "text", "confidence",
                  "score", "task", "source", "engine", "flags"}]}
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

# Running heads and page numbers repeat on every page and break the flow of the text.
LEFT_OUT_OF_MARKDOWN = {"header", "footer"}
_HYPHEN_END = re.compile(r"(\w)-$")
_BULLET = re.compile(r"^[•●▪◦‣∙·*-](?:\s+|$)")
_NUMBERED = re.compile(r"^\d{1,3}[.)]\s+")
# CDLA's detector sometimes calls a whole paragraph a title; a real title is short.
_MAX_TITLE_LINES, _MAX_TITLE_CHARS = 2, 150


def to_markdown(pages: Sequence[dict[str, Any]]) -> str:
    blocks: list[str] = []
    first_title_done = False
    for page in pages:
        regions = page["regions"]
        for i, region in enumerate(regions):
            label, text = region["label"], (region.get("text") or "").strip()
            if label in LEFT_OUT_OF_MARKDOWN:
                continue
            if label == "figure":
                caption = _neighbour_caption(regions, i, "figure_caption")
                alt = _one_line(caption) if caption else "figure"
                blocks.append(f"![{alt}](#page-{page['index'] + 1}-region-{region['order']})")
                continue
            if not text:
                continue
            if label == "title" and (len(text.splitlines()) > _MAX_TITLE_LINES or len(text) > _MAX_TITLE_CHARS):
                label = "text"
            if label == "title":
                level = "#" if not first_title_done else "##"
                first_title_done = True
                blocks.append(f"{level} {_one_line(text)}")
            elif label == "table":
                # A title above the grid and notes under it are paragraphs of their own.
                parts = text.split("\n\n")
                if any(_is_markdown_table(p) or _is_html_table(p) for p in parts):
                    blocks.extend(p if _is_markdown_table(p) or _is_html_table(p) else paragraph(p) for p in parts)
                else:
                    blocks.append(f"```text\n{text}\n```")
            elif label == "equation":
                blocks.append(f"$$\n{text}\n$$")
            elif label in ("figure_caption", "table_caption"):
                blocks.append(f"*{_one_line(text)}*")
            else:
                blocks.append(paragraph(text))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def to_json(job: dict[str, Any], pages: Sequence[dict[str, Any]]) -> str:
    out_pages = []
    for page in pages:
        dpi = page.get("dpi") or 72
        to_pt = 72.0 / dpi
        out_pages.append(
            {
                "index": page["index"],
                "width": page["width"],
                "height": page["height"],
                "dpi": dpi,
                "width_pt": page.get("width_pt"),
                "height_pt": page.get("height_pt"),
                "source": page["source"],
                "rotation": page.get("rotation", 0),
                "flags": page.get("flags", []),
                # workers/content/confidence.py: character-weighted mean of the regions'; None
                # when no region has text and a confidence.
                "confidence": page.get("confidence"),
                # The script OCR judged the page to be in (latin, cjk, unsupported); text-layer
                # pages and engines that do not judge have none.
                **({"script": page["script"]} if page.get("script") else {}),
                "regions": [
                    {
                        "order": r["order"],
                        "label": r["label"],
                        "bbox": [round(v, 2) for v in r["bbox"]],
                        "bbox_pt": [round(v * to_pt, 2) for v in r["bbox"]],
                        "polygon": r.get("polygon"),
                        "text": r.get("text", ""),
                        "confidence": r.get("confidence"),
                        "score": r.get("score"),
                        "source": r.get("source", page["source"]),
                        "engine": r.get("engine", ""),
                        "flags": r.get("flags", []),
                        # The layout model's task, when it gave one (PP-DocLayoutV3, one-stage VLMs).
                        **({"task": r["task"]} if r.get("task") else {}),
                        **({"table": r["table"]} if r.get("table") else {}),
                    }
                    for r in page["regions"]
                ],
            }
        )
    return json.dumps({**job, "pages": out_pages}, ensure_ascii=False, indent=1)


def paragraph(text: str) -> str:
    """Join a region's lines into one paragraph, mending words hyphenated across lines.

    A line that starts with a bullet or an item number starts a new Markdown list item.
    """
    items: list[str] = []
    out = ""
    for line in (l.strip() for l in text.splitlines()):
        if not line:
            continue
        if _BULLET.match(line) or _NUMBERED.match(line):
            if out:
                items.append(out)
            rest = _BULLET.sub("", line)
            out = line if _NUMBERED.match(line) else ("- " + rest if rest else "-")
        elif out == "-":
            out = f"- {line}"
        elif not out:
            out = line
        elif _HYPHEN_END.search(out) and line[:1].islower():
            out = out[:-1] + line
        else:
            out = f"{out} {line}"
    if out:
        items.append(out)
    return "\n".join(items)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _is_markdown_table(text: str) -> bool:
    lines = text.strip().splitlines()
    return len(lines) >= 2 and lines[0].startswith("|") and set(lines[1].replace("|", "").strip()) <= set("-: ")


def _is_html_table(text: str) -> bool:
    # A table with spanning cells is HTML; a caption found above the grid may precede it.
    return "<table>" in text and text.rstrip().endswith("</table>")


def _neighbour_caption(regions: Sequence[dict[str, Any]], i: int, label: str) -> str:
    for j in (i + 1, i - 1):
        if 0 <= j < len(regions) and regions[j]["label"] == label:
            return regions[j].get("text") or ""
    return ""
