"""Tesseract beside ours: the same pixels through tesserocr, one loaded engine per language set.

Page segmentation ``AUTO_OSD`` (Tesseract's orientation and script detection, ``osd.traineddata``)
so Tesseract too may find a turned page's way up; the source resolution is given only where the
submitted PNG records one (Tesseract estimates it otherwise, as ingest assumes one). A language
set whose data is missing (Debian ``tesseract-ocr-<lang>``) is reported as ``n/a``, not guessed.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image


def tessdata() -> str | None:
    candidates = [os.environ.get("TESSDATA_PREFIX", ""), *sorted(Path("/usr/share/tesseract-ocr").glob("*/tessdata"))]
    for folder in candidates:
        if folder and (Path(folder) / "eng.traineddata").exists():
            return str(folder)
    return None


class Tesseract:
    def __init__(self) -> None:
        import tesserocr

        self._tesserocr = tesserocr
        self.path = tessdata()
        self.version = tesserocr.tesseract_version().splitlines()[0]
        self._apis: dict[str, object] = {}
        self.installed = set(tesserocr.get_languages(self.path)[1]) if self.path else set()

    def has(self, lang: str) -> bool:
        return bool(lang) and all(part in self.installed for part in lang.split("+"))

    def _api(self, lang: str):
        if lang not in self._apis:
            psm = self._tesserocr.PSM.AUTO_OSD if "osd" in self.installed else self._tesserocr.PSM.AUTO
            self._apis[lang] = self._tesserocr.PyTessBaseAPI(path=self.path, lang=lang, psm=psm)
        return self._apis[lang]

    def read(self, image: np.ndarray, lang: str, dpi: int | None) -> str:
        api = self._api(lang)
        api.SetImage(Image.fromarray(image))
        if dpi:
            api.SetSourceResolution(dpi)
        return api.GetUTF8Text()

    def close(self) -> None:
        for api in self._apis.values():
            api.End()
        self._apis.clear()
