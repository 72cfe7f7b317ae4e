"""Decide what an upload is from its bytes, never its name, and refuse what we cannot process.

Every refusal is an ``InputError`` with a stable code; the API maps it to a 4xx and a worker
maps it to a failed job with the same code.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import BinaryIO

import pymupdf
from PIL import Image, UnidentifiedImageError

IMAGE_KINDS = ("png", "jpeg", "tiff", "webp", "bmp")
KINDS = ("pdf", *IMAGE_KINDS)
CONTENT_TYPES = {
    "pdf": "application/pdf",
    "png": "image/png",
    "jpeg": "image/jpeg",
    "tiff": "image/tiff",
    "webp": "image/webp",
    "bmp": "image/bmp",
}
SNIFF_BYTES = 1024


class InputError(Exception):
    """A document we refuse. ``status`` is the HTTP status used when refusing at the door."""

    def __init__(self, code: str, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Probe:
    kind: str
    page_count: int


def sniff(head: bytes) -> str | None:
    """The document type from its first bytes, or None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return "tiff"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head.startswith(b"BM") and len(head) >= 26:
        return "bmp"
    # The PDF spec lets the header start anywhere in the first 1024 bytes.
    if b"%PDF-" in head[:SNIFF_BYTES]:
        return "pdf"
    return None


def probe(stream: BinaryIO, *, max_pages: int, max_pixels: int) -> Probe:
    """Open the document once: type, page count, and every refusal we can make up front."""
    stream.seek(0)
    head = stream.read(SNIFF_BYTES)
    if not head:
        raise InputError("input:empty", "the file is empty", 422)
    kind = sniff(head)
    if kind is None:
        raise InputError(
            "input:unsupported-type",
            "not a PDF, PNG, JPEG, TIFF, WebP or BMP (type is read from the file's bytes)",
            415,
        )
    stream.seek(0)
    data = stream.read()
    if kind == "pdf":
        pages = _probe_pdf(data, max_pages=max_pages)
    else:
        pages = _probe_image(data, max_pages=max_pages, max_pixels=max_pixels)
    return Probe(kind=kind, page_count=pages)


def _too_many(pages: int, max_pages: int) -> InputError:
    return InputError("input:too-many-pages", f"{pages} pages; the limit is {max_pages}", 422)


def open_pdf(data: bytes) -> pymupdf.Document:
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:  # PyMuPDF raises its own FileDataError and plain RuntimeErrors
        raise InputError("input:corrupt", f"the PDF cannot be read: {exc}") from exc
    if doc.needs_pass or doc.is_encrypted:
        doc.close()
        raise InputError("input:encrypted", "the PDF is encrypted and needs a password")
    return doc


def _probe_pdf(data: bytes, *, max_pages: int) -> int:
    with open_pdf(data) as doc:
        try:
            count = doc.page_count
            if count == 0:
                raise InputError("input:empty", "the PDF has no pages")
            # Before touching any page: a million-page file must cost one lookup, not a million.
            if count > max_pages:
                raise _too_many(count, max_pages)
            for page in doc:
                rect = page.rect
                if rect.width <= 0 or rect.height <= 0:
                    raise InputError("input:corrupt", f"page {page.number + 1} has no area")
                # A page whose media box is absurd (a 200-inch square) would render to a huge image.
                if rect.width * rect.height > 14400 * 14400:
                    raise InputError(
                        "input:image-too-large", f"page {page.number + 1} is {rect.width:.0f}×{rect.height:.0f} pt"
                    )
        except InputError:
            raise
        except Exception as exc:  # a page tree broken past repair: MuPDF raises plain RuntimeErrors
            raise InputError("input:corrupt", f"the PDF's pages cannot be read: {exc}") from exc
        return count


def _probe_image(data: bytes, *, max_pages: int, max_pixels: int) -> int:
    try:
        with Image.open(io.BytesIO(data)) as img:
            # Every frame's header, not just the first: a TIFF's second page can claim 10^10
            # pixels. Walking the frames reads headers only; stop one past the page limit.
            frames = 0
            while True:
                width, height = img.size
                if width * height > max_pixels:
                    raise InputError(
                        "input:image-too-large",
                        f"page {frames + 1} is {width}×{height} pixels; the limit is {max_pixels} pixels",
                    )
                frames += 1
                if frames > max_pages:
                    raise _too_many(frames, max_pages)
                try:
                    img.seek(frames)
                except EOFError:
                    break
        with Image.open(io.BytesIO(data)) as img:
            img.verify()  # catches truncation and bad checksums without decoding pixels
    except InputError:
        raise
    except Image.DecompressionBombError as exc:
        raise InputError("input:image-too-large", str(exc)) from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise InputError("input:corrupt", f"the image cannot be read: {exc}") from exc
    except Exception as exc:  # Pillow's parsers raise struct.error, IndexError, KeyError... on junk
        raise InputError("input:corrupt", f"the image cannot be read: {type(exc).__name__}: {exc}") from exc
    return frames
