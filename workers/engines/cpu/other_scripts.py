"""Readers for the scripts the PP-OCR models here lack: Tesseract's LSTM models, chosen by reading.

The PP-OCRv6 models in the wheels read Latin, Greek, Chinese and Japanese. For a page the script
check judges ``unsupported`` (Cyrillic, Hangul, Arabic, Hebrew, Devanagari: read as lookalikes or
not at all), or a Latin page whose language needs letters the recogniser cannot write
(Vietnamese), this module asks Tesseract's models for that script. No wheel ships them
(docs/benchmarks.md, "Pages in unsupported scripts"); Debian does (``tesseract-ocr-script-cyrl``,
``-arab``, ``-hebr``, ``-deva``, ``-viet``, ``tesseract-ocr-kor``: the worker image installs
them), and tesserocr's wheel carries the Tesseract library. Where neither is present the page
keeps its flag, as before.

Which model reads is decided by reading, not guessed: a few of the page's widest lines are read
by each installed model and the one that reads them with clearly the highest confidence wins
(on the corpus's Declaration pages the right model reads its sample at 0.88-0.94 and every other
model at 0.16-0.50; docs/benchmarks.md). The page's lines are then read by that model line by
line (the boxes stay the detector's, so layout and reading order stay as for any page), and the
reading is kept only if the whole page reads with confidence: otherwise the page stays flagged.

Tesseract's *language* models of Latin-script languages (``tesseract-ocr-pol``, ``-ces``, ``-tur``,
...: ``language_model``) are never chosen this way (any Latin page reads well under them): the
recogniser asks the page's own language's model, once that language is identified, for a second
reading of the lines that still hold words the language does not use
(``recognizer._reread_unknown_words``), and keeps its words only where the vocabulary or its own
runners-up agree (``lexicon.merged``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

log = logging.getLogger("workers.engines.cpu")

# Script → the traineddata files that read it, best first. The script models cover every language
# written in the script; Hangul's script model spaces every syllable (word F1 0.28 on the Korean
# Declaration against 0.91 for ``kor``), so Korean reads with the language model.
MODELS: dict[str, tuple[str, ...]] = {
    "cyrillic": ("Cyrillic", "rus", "ukr", "bul"),
    "arabic": ("Arabic", "ara"),
    "hebrew": ("Hebrew", "heb"),
    "devanagari": ("Devanagari", "hin", "mar"),
    "hangul": ("kor", "Hangul"),
    "vietnamese": ("Vietnamese", "vie"),
}
# Each script's letters (Unicode blocks). Tesseract's Arabic, Hebrew and Devanagari models carry
# Latin too and read an English line at 0.92-0.96: a model wins only with a reading in its script.
LETTERS: dict[str, tuple[tuple[int, int], ...]] = {
    "cyrillic": ((0x0400, 0x052F), (0x1C80, 0x1C8F), (0x2DE0, 0x2DFF), (0xA640, 0xA69F)),
    "arabic": ((0x0600, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)),
    "hebrew": ((0x0590, 0x05FF), (0xFB1D, 0xFB4F)),
    "devanagari": ((0x0900, 0x097F), (0xA8E0, 0xA8FF)),
    "hangul": ((0x1100, 0x11FF), (0x3130, 0x318F), (0xAC00, 0xD7AF)),
    "vietnamese": ((0x0041, 0x005A), (0x0061, 0x007A), (0x00C0, 0x024F), (0x1E00, 0x1EFF)),
}
# A sample's reading is in a script when at least this share of its characters (spaces aside) are
# the script's letters: digits and punctuation are shared by all, a line of them proves nothing.
SCRIPT_SHARE_MIN = 0.5
# Models of a Latin script: chosen only by the language check (a Latin page whose language's
# letters the recogniser lacks), never by ``identify``'s default, where any Latin page would read
# well under them (an English line: 0.86-0.91 under Vietnamese).
LATIN_SCRIPTS = frozenset({"vietnamese"})
# Languages the Latin recogniser cannot write (``language:unsupported``) that a model here reads.
LANGUAGE_SCRIPTS: dict[str, str] = {"vi": "vietnamese"}
# Where Debian and others put Tesseract's models, tried after OCR_TESSDATA_DIR and TESSDATA_PREFIX.
TESSDATA_DIRS = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
    "/usr/local/share/tessdata",
)
# How many of the page's widest lines each model reads to decide; the sample's mean confidence
# (over the lines it read something on) that ends the search (once another model has read it
# less surely by ``MARGIN``), and that wins at all. The Declaration pages' samples read 0.88-0.94 under their script's model, a real
# Hebrew scan of mixed typefaces (tesseract-ocr/test's hebtypo) 0.77.
SAMPLE_LINES = 3
SURE = 0.85
ACCEPT = 0.7
# The winner must read the sample this much more surely than the runner-up: every other model
# read the pages above at 0.13-0.50, while a Latin page taken for another script reads 0.5-0.8
# under most of them (the Vietnamese sample: 0.51-0.78), so nothing reads it clearly best.
MARGIN = 0.2
# The whole page's reading is kept when its lines' character-weighted confidence reaches this;
# one kept under the platform's ocr:low-confidence threshold (0.85) carries that flag.
PAGE_ACCEPT = 0.7


def in_script(script: str, text: str) -> float:
    """The share of ``text``'s characters, spaces aside, that are ``script``'s letters."""
    chars = [ord(c) for c in text if not c.isspace()]
    blocks = LETTERS[script]
    return sum(any(lo <= c <= hi for lo, hi in blocks) for c in chars) / len(chars) if chars else 0.0


def tessdata_dir(configured: str = "") -> Path | None:
    """The folder holding Tesseract's models: ``configured`` (OCR_TESSDATA_DIR), else
    ``TESSDATA_PREFIX``, else the first of the usual places that holds a ``.traineddata``."""
    candidates = [configured] if configured else [os.environ.get("TESSDATA_PREFIX", ""), *TESSDATA_DIRS]
    for candidate in candidates:
        if candidate and any(Path(candidate).glob("*.traineddata")):
            return Path(candidate)
    return None


@dataclass(frozen=True)
class Identified:
    script: str
    model: str
    confidence: float  # the sample's mean confidence under the winning model
    runner_up: float


@dataclass
class OtherScriptReader:
    """Tesseract's models for the scripts in ``MODELS`` found under ``folder``; each loads the
    first time a page needs it (0.1-0.2 s) and stays loaded. Not thread-safe: the recognizer calls
    it under its lock."""

    folder: Path
    models: dict[str, str]  # script → the model file's name (without .traineddata) to read it with
    _apis: dict[str, object] = field(default_factory=dict, repr=False)
    _last: str = ""  # the script the last page was in: tried first (a batch is mostly one script)

    @classmethod
    def find(cls, configured: str = "") -> OtherScriptReader | None:
        """The reader for the models installed here, or None: tesserocr missing, or no model."""
        try:
            import tesserocr  # noqa: F401 - only whether it imports
        except ImportError:
            return None
        folder = tessdata_dir(configured)
        if folder is None:
            return None
        present = {p.name.removesuffix(".traineddata") for p in folder.glob("*.traineddata")}
        models = {
            script: next(m for m in names if m in present)
            for script, names in MODELS.items()
            if any(m in present for m in names)
        }
        return cls(folder, models) if models else None

    @property
    def name(self) -> str:
        return "tesseract LSTM (" + ", ".join(self.models.values()) + ")"

    def language_model(self, language: str) -> str | None:
        """The model installed here for ``language`` (an ISO 639-1 code such as CLD2 gives: ``pl``),
        or None. Tesseract names its language models by ISO 639-2/T (``pol``: Debian's
        ``tesseract-ocr-pol``); ``langcodes`` (wordfreq's dependency) knows the mapping."""
        import langcodes

        try:
            code = langcodes.Language.get(language).to_alpha3()
        except (LookupError, ValueError):
            return None
        return code if (self.folder / f"{code}.traineddata").is_file() else None

    def _api(self, model: str):
        if model not in self._apis:
            import tesserocr

            started = time.perf_counter()
            self._apis[model] = tesserocr.PyTessBaseAPI(
                path=str(self.folder), lang=model, psm=tesserocr.PSM.SINGLE_LINE, oem=tesserocr.OEM.LSTM_ONLY
            )
            log.info("CPU recognizer: Tesseract model %s loaded in %.2f s", model, time.perf_counter() - started)
        return self._apis[model]

    def read(self, script: str, crops: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        """(text, confidence in 0-1) of each line crop (BGR, text running across) under ``script``'s model."""
        return self.read_with(self.models[script], crops)

    def read_with(self, model: str, crops: Sequence[np.ndarray]) -> list[tuple[str, float]]:
        """(text, confidence in 0-1) of each line crop (BGR, text running across) under ``model``
        (a file's name in ``folder``, without .traineddata)."""
        from PIL import Image

        api = self._api(model)
        out = []
        for crop in crops:
            api.SetImage(Image.fromarray(np.ascontiguousarray(crop[:, :, ::-1])))
            text = " ".join(api.GetUTF8Text().split())
            out.append((text, api.MeanTextConf() / 100 if text else 0.0))
        return out

    def identify(self, crops: Sequence[np.ndarray], scripts: Sequence[str] | None = None) -> Identified | None:
        """The script whose model reads the page's widest lines clearly best (``SURE``/``ACCEPT``,
        ``MARGIN``) in that script's letters (``SCRIPT_SHARE_MIN``), or None. ``scripts``: the candidates
        (default: every installed one not of a Latin script, ``LATIN_SCRIPTS``)."""
        wanted = scripts or [s for s in self.models if s not in LATIN_SCRIPTS]
        candidates = [s for s in wanted if s in self.models]
        if self._last in candidates:
            candidates.remove(self._last)
            candidates.insert(0, self._last)
        widest = sorted(range(len(crops)), key=lambda i: -crops[i].shape[1])[:SAMPLE_LINES]
        sample = [crops[i] for i in widest]
        scores: dict[str, float] = {}
        for script in candidates:
            # A line read as nothing says nothing about the model: a detector's quad that took in
            # half of the next line's ascenders reads empty under Tesseract's single-line mode, and
            # counted as 0 it pulled the upright Russian Declaration's sample from 0.94 to 0.63.
            read = [(text, conf) for text, conf in self.read(script, sample) if text]
            # A reading not in the model's script counts for nothing, however sure (above).
            written = in_script(script, " ".join(text for text, _conf in read))
            scores[script] = (
                float(np.mean([conf for _text, conf in read])) if read and written >= SCRIPT_SHARE_MIN else 0.0
            )
            top = sorted(scores.values(), reverse=True)
            # Sure, and clearly surer than one other model: the rest need not read (a batch's next
            # page reads two models, its script's first).
            if len(top) >= 2 and top[0] >= SURE and top[0] - top[1] >= MARGIN:
                break
        ranked = sorted(scores.items(), key=lambda kv: -kv[1])
        best, best_score = ranked[0] if ranked else ("", 0.0)
        runner_up = ranked[1][1] if len(ranked) > 1 else 0.0
        log.debug("other scripts: sample read %s", {s: round(v, 3) for s, v in scores.items()})
        if best_score < ACCEPT or best_score - runner_up < MARGIN:
            return None
        self._last = best
        return Identified(best, self.models[best], round(best_score, 4), round(runner_up, 4))
