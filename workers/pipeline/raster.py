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
