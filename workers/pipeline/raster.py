"""Pages to RGB pixel arrays: PDF pages rendered by PyMuPDF, image frames decoded by Pillow."""

from __future__ import annotations

import io
import math

import numpy as np
import pymupdf
from PIL import Image, ImageOps

from workers.pipeline.probe import InputError


def render_pdf_page(page: pymupdf.Page, dpi: int, max_pixels: int) -> tuple[np.ndarray, int]:
    """Render at ``dpi``, lowered if the result would pass ``max_pixels``. Returns (image, dpi)."""
    rect = page.rect
    pixels = (rect.width * dpi / 72) * (rect.height * dpi / 72)
    if pixels > max_pixels:
        dpi = max(36, int(dpi * math.sqrt(max_pixels / pixels)))
        if (rect.width * dpi / 72) * (rect.height * dpi / 72) > max_pixels:
            # Even the lowest useful resolution is too big: refuse rather than allocate it.
            raise InputError(
                "input:image-too-large",
                f"page {page.number + 1} ({rect.width:.0f}×{rect.height:.0f} pt) passes {max_pixels} pixels at {dpi} dpi",
            )
    try:
        pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csRGB, alpha=False)
    except (RuntimeError, ValueError) as exc:  # MuPDF's errors on a page broken past repair
        raise InputError("input:corrupt", f"page {page.number + 1} cannot be rendered: {exc}") from exc
    image = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, pix.n)
    return image, dpi


# Below this many ink pixels in the thumbnail a page has too little text to tell its direction.
_MIN_INK = 200


def straighten_sideways_scan(page: pymupdf.Page) -> bool:
    """Undo a quarter-turn /Rotate that lays a page's lines of text on their side.

    Scanners and viewers often store an upright scan with /Rotate 90 or 270 (someone turned it
    while looking at it); rendered as displayed, the OCR models see vertical lines and read
    nothing. Lines of text leave empty pixel rows between them and almost no empty columns, so
    the direction with more empty rows than columns is the one the text runs in. Only a quarter
    turn is undone, and only when the page without it reads clearly better; returns whether
    the page's rotation was changed.
    """
    rotation = page.rotation
    if rotation % 180 != 90:
        return False
    shown = line_direction_score(_thumbnail(page))
    page.set_rotation(0)
    if line_direction_score(_thumbnail(page)) > shown + 0.05:
        return True
    page.set_rotation(rotation)
    return False


def line_direction_score(image: np.ndarray) -> float:
    """Share of empty pixel rows minus share of empty columns inside the inked area: positive
    when lines of text run left to right, negative when they run top to bottom."""
    gray = image.mean(axis=2) if image.ndim == 3 else image
    # Halfway between paper and the darkest ink: small print thins to light grey in a 40-dpi
    # thumbnail, while a scan's grey speckle stays on the paper side.
    paper, darkest = np.percentile(gray, 90), np.percentile(gray, 1)
    if paper - darkest < 40:
        return 0.0
    ink = gray < (paper + darkest) / 2
    ys, xs = np.nonzero(ink)
    if len(ys) < _MIN_INK:
        return 0.0
    ink = ink[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1]
    return float((ink.sum(axis=1) == 0).mean() - (ink.sum(axis=0) == 0).mean())


def _thumbnail(page: pymupdf.Page) -> np.ndarray:
    pix = page.get_pixmap(dpi=40, colorspace=pymupdf.csGRAY, alpha=False)
    return np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width)


def load_image_frame(data: bytes, frame: int, max_pixels: int) -> tuple[np.ndarray, int]:
    """Decode one frame as RGB, EXIF orientation applied. Returns (image, dpi or 0 when unknown)."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.seek(frame)
            # After the seek: each frame of a TIFF has its own size (the probe checked them too).
            if img.width * img.height > max_pixels:
                raise InputError("input:image-too-large", f"{img.width}×{img.height} pixels")
            dpi = img.info.get("dpi", (0, 0))[0] or 0
            rgb = ImageOps.exif_transpose(img).convert("RGB")
            return np.asarray(rgb), int(round(float(dpi)))
    except InputError:
        raise
    except Image.DecompressionBombError as exc:
        raise InputError("input:image-too-large", str(exc)) from exc
    except Exception as exc:  # any decoder failure on hostile bytes is this file's fault, not ours
        raise InputError("input:corrupt", f"frame {frame + 1} cannot be decoded: {type(exc).__name__}: {exc}") from exc


def encode_png(image: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def decode_png(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))
