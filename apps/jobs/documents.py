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


def probe(stream: BinaryIO, *, max_pages: int, max_pixels: int) -> Probe:
    """Open the document once: type, page count, and every refusal we can make up front."""
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
        pages = _probe_image(stream.read(), max_pages=max_pages, max_pixels=max_pixels)
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
            for page in doc:
                rect = page.rect
                if rect.width <= 0 or rect.height <= 0:
                    raise InputError(ErrorCode.INPUT_CORRUPT, f"page {page.number + 1} has no area")
                # A page whose media box is absurd (a 200-inch square) would render to a huge image.
                if rect.width * rect.height > 14400 * 14400:
                    raise InputError(
                        ErrorCode.INPUT_IMAGE_TOO_LARGE,
                        f"page {page.number + 1} is {rect.width:.0f}×{rect.height:.0f} pt",
                    )
        except InputError:
            raise
        except Exception as exc:  # a page tree broken past repair: MuPDF raises plain RuntimeErrors
            raise InputError(ErrorCode.INPUT_CORRUPT, f"the PDF's pages cannot be read: {exc}") from exc
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
                        ErrorCode.INPUT_IMAGE_TOO_LARGE,
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


# Below this many ink pixels in the probe a page has too little text to tell its direction.
_MIN_INK = 200


# --- orientation -----------------------------------------------------------------------------

# The probe: the page at about this resolution, in strips about this wide (an inch), so a few
# degrees of skew or two columns whose lines do not line up still give clean line bands.
_PROBE_DPI, _STRIP = 100, 100
# Below this share of ascender-minus-descender ink a page does not say which way is up.
_UPRIGHT_MARGIN = 0.05
_SIDEWAYS_MARGIN = 0.05
# Line bands: this much more alike one way than the other says which way lines run; fewer
# than this many bands, or fewer alike than this share, is not a page of text lines.
_REGULAR_MARGIN, _MIN_BANDS, _MIN_REGULAR = 0.1, 3, 0.6


@dataclass(frozen=True)
class Orientation:
    """How far (clockwise degrees) a scan's text stands turned, and the evidence: ``sideways``
    (empty rows minus empty columns: negative when lines run top to bottom), ``regular`` (how
    much more alike the line bands are across the page than down it) and ``upright`` (ascender
    minus descender ink over the line bands: negative when the text is upside down)."""

    rotation: int
    sideways: float = 0.0
    regular: float = 0.0
    upright: float = 0.0


@dataclass(frozen=True)
class _Bands:
    balance: float  # (ink above the dense core - ink below it) / both, over all bands
    regular: float  # share of bands within 0.6-1.6 x the median band height
    count: int


def detect_orientation(image: np.ndarray, dpi: int) -> Orientation:
    """The quarter-turn a scan's text stands at, from its ink alone (no OCR model).

    Cut into strips an inch wide, lines of text make bands of inked rows, all about one text
    height tall, with empty rows between them; cut the other way, the bands are words and
    letters of every width. Lines of text also leave empty pixel rows across the whole page and
    few empty columns. Which way is up comes from the letters: in Latin script more letters
    rise above the x-height (capitals, b d f h k l t, digits) than drop below it (g j p q y),
    so in each band more ink lies above its dense core than below; upside down, the other way
    round. A page that does not say clearly (a picture, one line, a script without that
    asymmetry) is left as it is: turning an upright page would cost more than it saves.
    """
    # Every step-th pixel of the green channel (dark ink is dark in any colour): whole-image
    # float maths (a grey average, an area mean) cost more than rendering the page, and the
    # darkest pixel of each cell thickens small print until its lines merge.
    step = max(1, round(dpi / _PROBE_DPI))
    small = image[::step, ::step, 1] if image.ndim == 3 else image[::step, ::step]
    # A sparse page (a few lines on white) has under 1 % ink: the darkest tenth of a percent.
    share = np.cumsum(np.bincount(small.ravel().astype(np.uint8), minlength=256)) / small.size
    paper, darkest = int(np.searchsorted(share, 0.90)), int(np.searchsorted(share, 0.001))
    if paper - darkest < 40:
        return Orientation(0)
    ink = small < (paper + darkest) / 2
    if ink.sum() < _MIN_INK:
        return Orientation(0)
    sideways = _line_direction(ink)
    across, down = _bands(ink), _bands(np.rot90(ink))
    regular = across.regular - down.regular
    turned = (regular <= -_REGULAR_MARGIN and sideways < _SIDEWAYS_MARGIN) or (
        sideways <= -2 * _SIDEWAYS_MARGIN and regular < 0
    )
    lines = down if turned else across
    if lines.count < _MIN_BANDS or lines.regular < _MIN_REGULAR or abs(lines.balance) < _UPRIGHT_MARGIN:
        return Orientation(0, sideways, regular, lines.balance)
    rotation = (90 if turned else 0) + (180 if lines.balance < 0 else 0)
    return Orientation(rotation, sideways, regular, lines.balance)


def upright_scan(image: np.ndarray, dpi: int) -> tuple[np.ndarray, int]:
    """A scanned page turned upright, and the clockwise turn it stood at (0 when unsure)."""
    rotation = detect_orientation(image, dpi).rotation
    return turn_upright(image, rotation), rotation


def turn_upright(image: np.ndarray, rotation: int) -> np.ndarray:
    """The image turned back by ``rotation`` clockwise degrees (counter-clockwise)."""
    return np.ascontiguousarray(np.rot90(image, rotation // 90)) if rotation % 360 else image


def _line_direction(ink: np.ndarray) -> float:
    ys, xs = np.nonzero(ink)
    box = ink[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]
    return float((box.sum(axis=1) == 0).mean() - (box.sum(axis=0) == 0).mean())


def _bands(ink: np.ndarray) -> _Bands:
    """Bands of inked rows in inch-wide strips: how lopsided and how alike they are."""
    above = below = 0
    heights: list[int] = []
    for x in range(0, ink.shape[1], _STRIP):
        rows = ink[:, x : x + _STRIP].sum(axis=1)
        inked = np.concatenate(([False], rows > 0, [False]))
        edges = np.flatnonzero(inked[1:] != inked[:-1])
        for y, end in zip(edges[::2], edges[1::2], strict=True):
            band = rows[y:end]
            if len(band) < 4:
                continue
            heights.append(len(band))
            if len(band) <= 60 and band.max() >= 3:
                core = np.flatnonzero(band >= 0.5 * band.max())
                top, bottom = core[0], core[-1]
                if bottom > top:
                    above += int(band[:top].sum())
                    below += int(band[bottom + 1 :].sum())
    if not heights:
        return _Bands(0.0, 0.0, 0)
    h = np.asarray(heights)
    median = np.median(h)
    regular = float(((h >= 0.6 * median) & (h <= 1.6 * median)).mean())
    total = above + below
    return _Bands((above - below) / total if total else 0.0, regular, len(heights))


def load_image_frame(data: bytes | str, frame: int, max_pixels: int) -> tuple[np.ndarray, int]:
    """Decode one frame as RGB, EXIF orientation applied. Returns (image, dpi or 0 when unknown).

    ``data`` is the file's bytes or its path (Pillow then reads only the frame it decodes)."""
    try:
        with Image.open(data if isinstance(data, str) else io.BytesIO(data)) as img:
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
    except Exception as exc:  # any decoder failure on hostile bytes is this file's fault, not ours
        raise InputError(
            ErrorCode.INPUT_CORRUPT, f"frame {frame + 1} cannot be decoded: {type(exc).__name__}: {exc}"
        ) from exc


def encode_png(image: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def decode_png(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))
