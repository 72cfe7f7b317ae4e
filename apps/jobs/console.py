"""What the operators' console shows beyond model fields: stored page images, result files,
region overlays, and a count that stays cheap on a large table.

The console never opens a tenant's document in the web process: a born-digital page that also
drew a JPEG scan bomb killed a gunicorn worker each time an operator opened its job (issue 35).
Pages read from their text layer have no stored image, so they are shown as their regions alone;
OCR pages show the PNG that ingest's budgeted child made.

Kept apart from ``admin.py`` so the admin classes read as configuration.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

from django.conf import settings
from django.core.files.storage import default_storage
from django.core.paginator import Paginator
from django.db import connections
from django.utils.functional import cached_property
from markdown_it import MarkdownIt
from PIL import Image

from apps.jobs.models import Job, Page, Region

THUMB_WIDTH = 200
RESULT_PREVIEW_BYTES = 256 * 1024
LOW_CONFIDENCE = 0.6

LABEL_COLOURS = {
    "text": "#1f77b4",
    "title": "#d62728",
    "header": "#9467bd",
    "footer": "#8c564b",
    "figure": "#2ca02c",
    "figure_caption": "#98df8a",
    "table": "#ff7f0e",
    "table_caption": "#ffbb78",
    "reference": "#7f7f7f",
    "equation": "#e377c2",
    "formula": "#e377c2",
    "list": "#17becf",
}
STATUS_COLOURS = {
    "queued": "#6c757d",
    "running": "#0d6efd",
    "assembling": "#6610f2",
    "done": "#198754",
    "failed": "#dc3545",
    "cancelled": "#adb5bd",
}


def label_colour(label: str) -> str:
    if label in LABEL_COLOURS:
        return LABEL_COLOURS[label]
    # A label we have no colour for still gets a stable one.
    palette = list(LABEL_COLOURS.values())
    return palette[sum(map(ord, label)) % len(palette)]


class CappedCountPaginator(Paginator):
    """Counts exactly up to OCR_CONSOLE_COUNT_CAP matches, then shows PostgreSQL's estimate.

    COUNT(*) over 100k+ rows costs more than the page itself; operators need "about 120,000",
    not the exact figure. Other databases (SQLite in the embedded profile) count exactly.
    """

    @cached_property
    def count(self) -> int:
        qs = self.object_list
        if connections[qs.db].vendor != "postgresql":
            return super().count
        cap = settings.OCR_CONSOLE_COUNT_CAP
        capped = qs.order_by()[: cap + 1].count()
        if capped <= cap:
            return capped
        return max(capped, _planner_rows(qs))


def _planner_rows(qs) -> int:
    try:
        plan = json.loads(qs.order_by().explain(format="json"))
        return int(plan[0]["Plan"]["Plan Rows"])
    except (ValueError, KeyError, IndexError, TypeError):
        return 0


# --- images ------------------------------------------------------------------------------------


class NoImage(Exception):
    """The page has no stored image (read from its text layer, or purged)."""


@dataclass(frozen=True)
class ImageBody:
    content: bytes | None  # rendered or resized here
    stored_name: str | None  # or streamed from storage as it is
    content_type: str


def page_image(page: Page, width: int | None = None) -> ImageBody:
    """The page's stored PNG (streamed) or a JPEG thumbnail of it. Only images ingest stored
    (bounded by OCR_MAX_IMAGE_PIXELS, made under the page budget) are decoded here."""
    if not page.image:
        raise NoImage(f"page {page.index + 1} has no stored image (read from its text layer, or purged)")
    if not width:
        return ImageBody(None, page.image.name, "image/png")
    with default_storage.open(page.image.name, "rb") as fh:
        return ImageBody(_thumbnail(fh.read(), width), None, "image/jpeg")


def _thumbnail(data: bytes, width: int) -> bytes:
    with Image.open(io.BytesIO(data)) as img:
        img = img.convert("RGB")
        img.thumbnail((width, width * 4))
        out = io.BytesIO()
        img.save(out, format="JPEG", quality=70)
        return out.getvalue()


# --- results -----------------------------------------------------------------------------------

# Images and links in a document's text stay text: an image would be fetched by the operator's
# browser (telling its owner who looked, and when) and a link invites a click out of the console.
_markdown = MarkdownIt("commonmark", {"html": False}).enable("table").disable(["image", "link", "autolink"])


def read_result(job: Job, fmt: str, limit: int = RESULT_PREVIEW_BYTES) -> tuple[str, bool] | None:
    """Up to ``limit`` bytes of the stored Markdown or JSON, and whether it was cut."""
    field = job.result_markdown if fmt == "markdown" else job.result_json
    if not field:
        return None
    try:
        with default_storage.open(field.name, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError:
        return None
    return data[:limit].decode("utf-8", "replace"), len(data) > limit


def render_markdown(text: str) -> str:
    """HTML from OCR output: raw HTML is escaped, images and links are shown as their text."""
    return _markdown.render(text)


def pretty_json(text: str, cut: bool) -> str:
    if cut:
        return text  # a cut document does not parse; show it as stored
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


# --- regions -----------------------------------------------------------------------------------


def region_flags(region: Region) -> list[str]:
    """Flags the engines set, plus low confidence, which we judge here."""
    flags = [str(f) for f in (region.flags or [])]
    if region.confidence is not None and region.confidence < LOW_CONFIDENCE and "low-confidence" not in flags:
        flags.insert(0, "low-confidence")
    return flags


def overlay(page: Page, regions: list[Region]) -> dict:
    """Geometry for the SVG over the page image, in the page's pixel coordinates (the space the
    regions are stored in), so it lines up whatever size the image is drawn at."""
    width = page.width or max((r.x1 for r in regions), default=1)
    height = page.height or max((r.y1 for r in regions), default=1)
    stroke = max(2, round(max(width, height) / 400))
    return {
        "width": width,
        "height": height,
        "stroke": stroke,
        "font": max(12, round(max(width, height) / 60)),
        "boxes": [
            {
                "region": r,
                "x": r.x0,
                "y": r.y0,
                "w": max(1.0, r.x1 - r.x0),
                "h": max(1.0, r.y1 - r.y0),
                "colour": label_colour(r.label),
                "number": r.order + 1,
                "flags": region_flags(r),
            }
            for r in regions
        ],
    }
