"""The documents the clients submit (each page carrying its document's own token) and what a
finished job's result must hold."""

from __future__ import annotations

import io
import random
import re
import uuid
from dataclasses import dataclass, field

import pymupdf
from PIL import Image

from tests.chaos.plan import ROOT

PHOTOTEST = ROOT / "tests" / "data" / "phototest.tif"
TOKEN = re.compile(r"tok\d{5}x[0-9a-f]{6}")


@dataclass
class Doc:
    index: int
    kind: str  # "pdf" | "scan"
    pages: int
    token: str
    data: bytes = field(repr=False)
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    job_id: str = ""
    status: str = ""
    submit_tries: int = 0
    problems: list[str] = field(default_factory=list)


def make_doc(index: int, rng: random.Random, scan_share: float) -> Doc:
    token = f"tok{index:05d}x{rng.getrandbits(24):06x}"
    if rng.random() < scan_share:
        pages = rng.choice((1, 2))
        with Image.open(PHOTOTEST) as img:
            frame = img.convert("L")
        # The result cache answers a document it has read before with no page work, so every scan
        # differs in a few margin pixels (invisible to OCR): each one is work for layout and ocr.
        for bit in range(24):
            frame.putpixel((bit, 0), 255 if (index >> bit) & 1 else 250)
        out = io.BytesIO()
        frame.save(out, "TIFF", save_all=True, append_images=[frame.copy() for _ in range(pages - 1)], dpi=(300, 300))
        return Doc(index, "scan", pages, token, out.getvalue())
    pages = rng.choice((1, 1, 2, 3))
    doc = pymupdf.open()
    for page_no in range(1, pages + 1):
        page = doc.new_page()
        page.insert_text((72, 72), f"Chaos document {token} page {page_no} of {pages}.", fontsize=11)
        page.insert_text((72, 100), "A born-digital page: its text layer is long enough to skip OCR.", fontsize=11)
    return Doc(index, "pdf", pages, token, doc.tobytes())


def check_result(doc: Doc, markdown: str, layout: dict) -> list[str]:
    """What is wrong with a finished job's result (empty: nothing)."""
    problems = []
    pages = layout.get("pages", [])
    if len(pages) != doc.pages:
        problems.append(f"{len(pages)} pages in the JSON, {doc.pages} in the document")
    for page in pages:
        seen = set()
        for region in page.get("regions", []):
            ident = (tuple(region.get("bbox") or ()), region.get("text", ""))
            if ident in seen and ident[1].strip():
                problems.append(f"region duplicated on page {page.get('index')}: {ident[1][:40]!r}")
            seen.add(ident)
    foreign = set(TOKEN.findall(markdown)) - {doc.token}
    if foreign:
        problems.append(f"another document's text: {sorted(foreign)[:3]}")
    if doc.kind == "pdf":
        for page_no in range(1, doc.pages + 1):
            n = markdown.count(f"{doc.token} page {page_no} of {doc.pages}")
            if n != 1:
                problems.append(f"page {page_no} appears {n} times")
    else:
        for i, page in enumerate(pages):
            text = " ".join(r.get("text", "") for r in page.get("regions", [])).lower()
            n = text.count("lazy")
            if not 1 <= n <= 4:  # the scan says "lazy fox" four times: more is a duplicate
                problems.append(f"scan page {i + 1}: 'lazy' {n} times")
    return problems


def accepted(docs: list[Doc]) -> int:
    """How many of the documents the API has accepted (a job id), so far."""
    return sum(1 for d in docs if d.job_id)
