"""Documents: what an upload is (from its bytes, never its name) and its pages as pixels.

Every refusal is an ``InputError`` with a stable code from ``ocrsite.vocabulary.ErrorCode``; the
API maps the code to a 4xx (``apps.api.errors``) and ingest to a failed job with the same code.
Pure functions over bytes: the door (probe), ingest (render, decode) and the console (previews)
share them, and nothing here touches the database or storage.
"""

from __future__ import annotations

import io
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from ocrsite.vocabulary import ErrorCode

if TYPE_CHECKING:
    import pymupdf

# pymupdf is imported by the functions that read PDFs: ~0.5 CPU-s (and ~90 MB) a process reading
# only images (the embedded CLI on a scan, a worker of the cpu queue) need not pay.

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
# A baseline JPEG has one scan and a progressive one about ten; each scan is a pass over every
# coefficient of the image, so a file that repeats its last scan 40,000 times (a few hundred KB)
# kept a decoder busy for minutes. Counting scans costs one pass over the bytes.
JPEG_MAX_SCANS = 100
# What an image document may decode to in all (every frame, each animation frame at its canvas
# size), per byte of the file, past OCR_MAX_IMAGE_PIXELS: a blank 300 dpi page in CCITT G4 is
# ~6,000 pixels a byte; the animated WebP (1,500 frames on a 4000x4000 canvas, tiny
# deltas) ~300,000.
DEFAULT_PIXELS_PER_BYTE = 50_000


class InputError(Exception):
    """A document we refuse. Always permanent: the same bytes will be refused again."""

    permanent = True

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = str(code)  # a plain string from here on: it is stored, logged and serialized
        self.message = message


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


def probe(
    stream: BinaryIO, *, max_pages: int, max_pixels: int, pixels_per_byte: int = DEFAULT_PIXELS_PER_BYTE
) -> Probe:
    """Open the document once: type, page count, and every refusal we can make up front.

    Bounded work in the web process whatever the file: a PDF's pages are counted and measured
    from the page tree (never loaded: loading a page reads its annotations, and a 1.6M-entry
    ``/Annots`` array shared by 20 pages held a web thread for minutes); an image's frames are
    walked by their headers, its JPEG scans counted, and its decoded size in all weighed against
    its bytes. Nothing is decoded or drawn here."""
    stream.seek(0)
    head = stream.read(SNIFF_BYTES)
    if not head:
        raise InputError(ErrorCode.INPUT_EMPTY, "the file is empty")
    kind = sniff(head)
    if kind is None:
        raise InputError(
            ErrorCode.INPUT_UNSUPPORTED_TYPE,
            "not a PDF, PNG, JPEG, TIFF, WebP or BMP (type is read from the file's bytes)",
        )
    stream.seek(0)
    if kind == "pdf":
        # A file on disk (a spooled upload) is opened by path: MuPDF reads only what it needs,
        # and a 2 GB document is never copied into memory.
        path = getattr(stream, "name", None)
        pages = _probe_pdf(
            path if isinstance(path, str) and Path(path).is_file() else stream.read(), max_pages=max_pages
        )
    else:
        pages = _probe_image(
            stream.read(), kind=kind, max_pages=max_pages, max_pixels=max_pixels, pixels_per_byte=pixels_per_byte
        )
    return Probe(kind=kind, page_count=pages)


def _too_many(pages: int, max_pages: int) -> InputError:
    return InputError(ErrorCode.INPUT_TOO_MANY_PAGES, f"{pages} pages; the limit is {max_pages}")


def open_pdf(data: bytes | str) -> pymupdf.Document:
    """A PDF from its bytes or from a file's path (MuPDF then reads the file as it needs it)."""
    import pymupdf

    try:
        doc = pymupdf.open(data, filetype="pdf") if isinstance(data, str) else pymupdf.open(stream=data, filetype="pdf")
    except Exception as exc:  # PyMuPDF raises its own FileDataError and plain RuntimeErrors
        raise InputError(ErrorCode.INPUT_CORRUPT, f"the PDF cannot be read: {exc}") from exc
    if doc.needs_pass or doc.is_encrypted:
        doc.close()
        raise InputError(ErrorCode.INPUT_ENCRYPTED, "the PDF is encrypted and needs a password")
    return doc


def _probe_pdf(data: bytes | str, *, max_pages: int) -> int:
    with open_pdf(data) as doc:
        try:
            count = doc.page_count
            if count == 0:
                raise InputError(ErrorCode.INPUT_EMPTY, "the PDF has no pages")
            # Before touching any page: a million-page file must cost one lookup, not a million.
            if count > max_pages:
                raise _too_many(count, max_pages)
            for number in range(count):
                # The page's box from the page tree, without loading the page (which would read
                # its annotations, however many there are).
                rect = doc.page_cropbox(number)
                if rect.width <= 0 or rect.height <= 0:
                    raise InputError(ErrorCode.INPUT_CORRUPT, f"page {number + 1} has no area")
                # A page whose media box is absurd (a 200-inch square) would render to a huge image.
                if rect.width * rect.height > 14400 * 14400:
                    raise InputError(
                        ErrorCode.INPUT_IMAGE_TOO_LARGE,
                        f"page {number + 1} is {rect.width:.0f}×{rect.height:.0f} pt",
                    )
        except InputError:
            raise
        except Exception as exc:  # a page tree broken past repair: MuPDF raises plain RuntimeErrors
            raise InputError(ErrorCode.INPUT_CORRUPT, f"the PDF's pages cannot be read: {exc}") from exc
        return count


def jpeg_scans(data: bytes) -> int:
    """The scans (SOS markers) of a JPEG. Entropy-coded data stuffs every 0xFF with 0x00, so
    ``FF DA`` appears only as a marker."""
    return data.count(b"\xff\xda")


def _probe_image(data: bytes, *, kind: str, max_pages: int, max_pixels: int, pixels_per_byte: int) -> int:
    if kind == "jpeg" and (scans := jpeg_scans(data)) > JPEG_MAX_SCANS:
        raise InputError(ErrorCode.INPUT_TOO_COMPLEX, f"the JPEG has {scans} scans; the limit is {JPEG_MAX_SCANS}")
    try:
        with Image.open(io.BytesIO(data)) as img:
            # Every frame's header, not just the first: a TIFF's second page can claim 10^10
            # pixels. Walking the frames reads headers only; stop one past the page limit.
            frames = decoded = 0
            while True:
                width, height = img.size
                if width * height > max_pixels:
                    raise InputError(
                        ErrorCode.INPUT_IMAGE_TOO_LARGE,
                        f"page {frames + 1} is {width}×{height} pixels; the limit is {max_pixels} pixels",
                    )
                frames += 1
                # An animation frame is drawn onto the whole canvas (img.size), however small it is.
                decoded += width * height
                if frames > max_pages:
                    raise _too_many(frames, max_pages)
                try:
                    img.seek(frames)
                except EOFError:
                    break
            allowed = max(max_pixels, len(data) * pixels_per_byte)
            if decoded > allowed:
                raise InputError(
                    ErrorCode.INPUT_TOO_LARGE,
                    f"{frames} frame(s) decode to {decoded} pixels from {len(data)} bytes; the limit for this "
                    f"file is {allowed} pixels",
                )
        with Image.open(io.BytesIO(data)) as img:
            img.verify()  # catches truncation and bad checksums without decoding pixels
    except InputError:
        raise
    except Image.DecompressionBombError as exc:
        raise InputError(ErrorCode.INPUT_IMAGE_TOO_LARGE, str(exc)) from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise InputError(ErrorCode.INPUT_CORRUPT, f"the image cannot be read: {exc}") from exc
    except Exception as exc:  # Pillow's parsers raise struct.error, IndexError, KeyError... on junk
        raise InputError(ErrorCode.INPUT_CORRUPT, f"the image cannot be read: {type(exc).__name__}: {exc}") from exc
    return frames


# --- pages as pixels -------------------------------------------------------------------------

# MuPDF keeps fonts and objects of every page it read in its store (up to 256 MB): over a
# 2,000-page document that is most of ingest's memory. Emptied every this many pages, memory stays
# flat; a page's shared fonts are re-read at most once per this many pages.
PDF_STORE_EVERY = 25


def release_pdf_cache() -> None:
    """Empty MuPDF's object store (fonts, images, parsed objects of pages already read). It keeps
    them past the document's close, up to 256 MB per process, so a process rendering page after
    page grew with every scanned page (tests/test_worker_memory.py). Nothing to empty in a process
    that never opened a PDF."""
    pymupdf = sys.modules.get("pymupdf")
    if pymupdf is not None:
        pymupdf.TOOLS.store_shrink(100)


def render_pdf_page(page: pymupdf.Page, dpi: int, max_pixels: int) -> tuple[np.ndarray, int]:
    """Render at ``dpi``, lowered if the result would pass ``max_pixels``. Returns (image, dpi)."""
    import pymupdf

    rect = page.rect
    pixels = (rect.width * dpi / 72) * (rect.height * dpi / 72)
    if pixels > max_pixels:
        dpi = max(36, int(dpi * math.sqrt(max_pixels / pixels)))
        if (rect.width * dpi / 72) * (rect.height * dpi / 72) > max_pixels:
            # Even the lowest useful resolution is too big: refuse rather than allocate it.
            raise InputError(
                ErrorCode.INPUT_IMAGE_TOO_LARGE,
                f"page {page.number + 1} ({rect.width:.0f}×{rect.height:.0f} pt) passes {max_pixels} pixels at {dpi} dpi",
            )
    try:
        pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csRGB, alpha=False)
    except (RuntimeError, ValueError) as exc:  # MuPDF's errors on a page broken past repair
        raise InputError(ErrorCode.INPUT_CORRUPT, f"page {page.number + 1} cannot be rendered: {exc}") from exc
    image = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, pix.n)
    return image, dpi


def load_image_frame(data: bytes | str, frame: int, max_pixels: int) -> tuple[np.ndarray, int]:
    """Decode one frame as RGB, EXIF orientation applied. Returns (image, dpi or 0 when unknown).

    ``data`` is the file's bytes or its path (Pillow then reads only the frame it decodes)."""
    with open_image(data) as img:
        return decode_frame(img, frame, max_pixels)


def open_image(data: bytes | str) -> Image.Image:
    try:
        return Image.open(data if isinstance(data, str) else io.BytesIO(data))
    except Exception as exc:
        raise InputError(ErrorCode.INPUT_CORRUPT, f"the image cannot be read: {type(exc).__name__}: {exc}") from exc


def decode_frame(img: Image.Image, frame: int, max_pixels: int) -> tuple[np.ndarray, int]:
    """Frame ``frame`` of an open image as RGB (EXIF orientation applied) and its dpi (0 when
    unknown). Frames read in increasing order from one open image cost one decode each; an
    animated WebP reopened for each frame decoded every frame before it again."""
    try:
        if img.tell() != frame:
            img.seek(frame)
        # After the seek: each frame of a TIFF has its own size (the probe checked them too).
        if img.width * img.height > max_pixels:
            raise InputError(ErrorCode.INPUT_IMAGE_TOO_LARGE, f"{img.width}×{img.height} pixels")
        dpi = img.info.get("dpi", (0, 0))[0] or 0
        rgb = ImageOps.exif_transpose(img).convert("RGB")
        return np.asarray(rgb), int(round(float(dpi)))
    except InputError:
        raise
    except Image.DecompressionBombError as exc:
        raise InputError(ErrorCode.INPUT_IMAGE_TOO_LARGE, str(exc)) from exc
    except MemoryError:
        raise
    except Exception as exc:  # any decoder failure on hostile bytes is this file's fault, not ours
        raise InputError(
            ErrorCode.INPUT_CORRUPT, f"frame {frame + 1} cannot be decoded: {type(exc).__name__}: {exc}"
        ) from exc


def encode_png(image: np.ndarray) -> bytes:
    """A page image as stored between stages. A grey page (most scans) is stored with one channel:
    half the bytes, and a third of the time to encode (~22 ms, not ~47, on a 200-dpi page)."""
    if (
        image.ndim == 3
        and np.array_equal(image[..., 0], image[..., 1])
        and np.array_equal(image[..., 1], image[..., 2])
    ):
        image = image[..., 0]
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def decode_png(data: bytes, max_pixels: int) -> np.ndarray:
    """A stored page image (``encode_png``) as RGB. OpenCV decodes it in about two thirds of
    Pillow's time; the size in its header is checked against ``max_pixels`` (what ingest may
    store) first, so damaged or planted bytes cannot make it allocate more than a page."""
    import cv2

    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG image")
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if width * height > max_pixels:
        raise ValueError(f"{width}x{height} pixels is more than a stored page holds")
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if bgr is None:
        raise ValueError("the PNG data cannot be decoded")
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
