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
    pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csRGB, alpha=False)
    image = np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, pix.n)
    return image, dpi


def load_image_frame(data: bytes, frame: int, max_pixels: int) -> tuple[np.ndarray, int]:
    """Decode one frame as RGB, EXIF orientation applied. Returns (image, dpi or 0 when unknown)."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            if img.width * img.height > max_pixels:
                raise InputError("input:image-too-large", f"{img.width}×{img.height} pixels")
            img.seek(frame)
            dpi = img.info.get("dpi", (0, 0))[0] or 0
            rgb = ImageOps.exif_transpose(img).convert("RGB")
            return np.asarray(rgb), int(round(float(dpi)))
    except InputError:
        raise
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise InputError("input:corrupt", f"frame {frame + 1} cannot be decoded: {exc}") from exc


def encode_png(image: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def decode_png(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as img:
        return np.asarray(img.convert("RGB"))
