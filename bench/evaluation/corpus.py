"""The evaluation corpus: ``bench/corpus/manifest.toml`` read into documents, and each document's
variants derived into the pages the runner submits.

A document is one committed file (``bench/corpus/files/...``) with its provenance (source
repository, commit, path there, licence), its class (kind, script), its ground truth and its
variants. A variant spec names how a page is derived, read left to right::

    <resolution>[-nometa][-r<turn>][-faint]

- resolution: ``orig`` (the file submitted unchanged; PDFs with OCR forced), ``native`` (an
  image's own pixels), or a number: a PDF page rendered at that many dpi, or an image resampled
  from its own resolution to that many dpi (area averaging down, Lanczos up);
- ``-nometa``: the PNG carries no resolution (no pHYs chunk), so ingest must assume one;
  without it the PNG records the page's true dpi;
- ``-r<turn>``: the pixels turned clockwise by 90, 180 or 270 degrees; the page then needs
  ``(source turn + turn) % 360`` to come back upright (the manifest's ``turned`` says how far a
  source image is itself turned);
- ``-faint``: ink lightened to a third of its contrast (a faint photocopy or a tired ribbon).

Nothing here imports Django: the runner owns the pipeline.
"""

from __future__ import annotations

import csv
import io
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
from PIL import Image

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
MANIFEST = CORPUS / "manifest.toml"
FILES = CORPUS / "files"

_SPEC = re.compile(r"^(?P<res>orig|native|\d+)(?P<nometa>-nometa)?(?:-r(?P<turn>90|180|270))?(?P<faint>-faint)?$")
# Pages past these sizes (pixels) are the corpus's "huge" and "tiny" classes: huge is more than
# an A4 page at 550 dpi (a flatbed's whole bed, a poster), tiny less than a business card at 150.
HUGE_PIXELS = 25_000_000
TINY_PIXELS = 300_000


def size_class(width: int, height: int) -> str:
    pixels = width * height
    return "huge" if pixels >= HUGE_PIXELS else "tiny" if pixels <= TINY_PIXELS else "normal"


@dataclass(frozen=True)
class Variant:
    spec: str
    resolution: str  # "orig", "native" or a dpi as digits
    meta: bool
    turn: int
    faint: bool

    @classmethod
    def parse(cls, spec: str) -> Variant:
        m = _SPEC.match(spec)
        if not m:
            raise ValueError(f"bad variant {spec!r}: expected <orig|native|dpi>[-nometa][-r90|180|270][-faint]")
        return cls(spec, m["res"], not m["nometa"], int(m["turn"] or 0), bool(m["faint"]))


@dataclass(frozen=True)
class Source:
    name: str
    repo: str
    commit: str
    licence: str
    url: str = ""
    note: str = ""


@dataclass(frozen=True)
class Document:
    id: str
    source: Source
    origin: str  # path in the source repository (or how the file was made)
    file: Path
    kind: str
    script: str
    lang: str  # Tesseract's language(s) for it, "" where it has none here
    truth: str  # "text-layer", "file:<path>", "sroie:<path>", "text:<literal>" or "" (orientation only)
    variants: tuple[str, ...]
    ci: tuple[str, ...]
    pages: tuple[int, ...] = ()  # 1-based PDF pages; () = all
    turned: int = 0  # how far the source file itself is turned clockwise
    sha256: str = ""  # of the committed file, as read from its source
    note: str = ""

    @property
    def is_pdf(self) -> bool:
        return self.file.suffix.lower() == ".pdf"

    @cached_property
    def page_numbers(self) -> tuple[int, ...]:
        if not self.is_pdf:
            return (1,)
        if self.pages:
            return self.pages
        import pymupdf

        with pymupdf.open(self.file) as doc:
            return tuple(range(1, len(doc) + 1))

    def truth_text(self, page: int) -> str | None:
        if not self.truth:
            return None
        kind, _, arg = self.truth.partition(":")
        if kind == "text-layer":
            import pymupdf

            with pymupdf.open(self.file) as doc:
                return doc[page - 1].get_text("text")
        if kind == "text":
            return arg
        if kind == "file":
            return (FILES / arg).read_text(encoding="utf-8")
        if kind == "pages":
            # One truth file per page: the path with {page} filled in.
            return (FILES / arg.format(page=page)).read_text(encoding="utf-8")
        if kind == "sroie":
            # ICDAR SROIE box file: x1,y1,...,x4,y4,transcript (the transcript may hold commas).
            rows = csv.reader(io.StringIO((FILES / arg).read_text(encoding="utf-8", errors="replace")))
            return "\n".join(",".join(row[8:]) for row in rows if len(row) > 8)
        raise ValueError(f"{self.id}: unknown truth {self.truth!r}")


@dataclass
class Page:
    """One page of the corpus as submitted: what it is, how it was made, what it should read."""

    id: str
    doc: Document
    number: int
    variant: Variant
    classes: dict = field(default_factory=dict)

    @property
    def expected_rotation(self) -> int:
        return (self.doc.turned + self.variant.turn) % 360

    @property
    def cls(self) -> str:
        return f"{self.doc.kind}/{self.doc.script}"


def load(manifest: Path = MANIFEST) -> list[Document]:
    data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    sources = {name: Source(name=name, **fields) for name, fields in data["sources"].items()}
    docs = []
    seen = set()
    for entry in data["docs"]:
        entry = dict(entry)
        if entry["id"] in seen:
            raise ValueError(f"duplicate document id {entry['id']}")
        seen.add(entry["id"])
        source = sources[entry.pop("source")]
        file = FILES / entry.pop("file")
        variants = tuple(entry.pop("variants"))
        ci = tuple(entry.pop("ci", ()))
        for spec in variants + ci:
            Variant.parse(spec)
        unknown = set(ci) - set(variants)
        if unknown:
            raise ValueError(f"{entry['id']}: ci variants {sorted(unknown)} not among its variants")
        docs.append(
            Document(
                source=source,
                file=file,
                variants=variants,
                ci=ci,
                origin=entry.pop("from"),
                pages=tuple(entry.pop("pages", ())),
                lang=entry.pop("lang", ""),
                truth=entry.pop("truth", ""),
                **entry,
            )
        )
    return docs


def pages(docs: list[Document], *, ci: bool = False, only: str = "") -> Iterator[Page]:
    """Every page the corpus (or its CI slice) derives, in manifest order."""
    pattern = re.compile(only) if only else None
    for doc in docs:
        for number in doc.page_numbers:
            for spec in doc.ci if ci else doc.variants:
                pid = f"{doc.id}/p{number}/{spec}"
                if pattern and not pattern.search(pid):
                    continue
                yield Page(pid, doc, number, Variant.parse(spec))


# --- deriving a page's bytes -------------------------------------------------------------------


@dataclass
class Derived:
    """What is submitted (``data`` named ``filename``) and the pixels Tesseract gets beside it."""

    data: bytes
    filename: str
    image: np.ndarray  # RGB, as the page is submitted (turned, resampled, faint)
    dpi: int  # the page's true resolution
    meta: bool

    @property
    def size_class(self) -> str:
        return size_class(self.image.shape[1], self.image.shape[0])


def _image_dpi(img: Image.Image) -> int:
    dpi = img.info.get("dpi", (0, 0))[0] or 0
    return int(round(float(dpi))) or 300


def _png(image: np.ndarray, dpi: int | None) -> bytes:
    buf = io.BytesIO()
    kwargs = {"dpi": (dpi, dpi)} if dpi else {}
    Image.fromarray(image).save(buf, format="PNG", compress_level=1, **kwargs)
    return buf.getvalue()


def _faint(image: np.ndarray) -> np.ndarray:
    # Ink keeps a third of its distance from white: black print becomes mid-light grey.
    return (255 - (255 - image.astype(np.int16)) // 3).astype(np.uint8)


def render_pdf(path: Path, number: int, dpi: int, max_pixels: int | None = None) -> tuple[np.ndarray, int]:
    """A PDF page rendered as RGB at ``dpi``, lowered as ingest lowers it past ``max_pixels``."""
    import pymupdf

    with pymupdf.open(path) as doc:
        page = doc[number - 1]
        if max_pixels:
            rect = page.rect
            pixels = (rect.width * dpi / 72) * (rect.height * dpi / 72)
            if pixels > max_pixels:
                dpi = max(36, int(dpi * (max_pixels / pixels) ** 0.5))
        pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csRGB, alpha=False)
        return np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, pix.n).copy(), dpi


def derive(page: Page, *, ocr_dpi: int = 200, max_pixels: int = 60_000_000) -> Derived:
    doc, v = page.doc, page.variant
    if v.resolution == "orig":
        data = doc.file.read_bytes()
        if doc.is_pdf:
            image, dpi = render_pdf(doc.file, page.number, ocr_dpi, max_pixels)
        else:
            with Image.open(doc.file) as img:
                dpi = _image_dpi(img)
                image = np.asarray(img.convert("RGB"))
        return Derived(data, doc.file.name, image, dpi, True)
    if doc.is_pdf:
        if v.resolution == "native":
            raise ValueError(f"{page.id}: a PDF page has no native resolution; give a dpi")
        image, dpi = render_pdf(doc.file, page.number, int(v.resolution))
    else:
        with Image.open(doc.file) as img:
            dpi = _image_dpi(img)
            rgb = img.convert("RGB")
            if v.resolution != "native" and int(v.resolution) != dpi:
                target = int(v.resolution)
                size = (max(1, round(rgb.width * target / dpi)), max(1, round(rgb.height * target / dpi)))
                rgb = rgb.resize(size, Image.Resampling.BOX if target < dpi else Image.Resampling.LANCZOS)
                dpi = target
            image = np.asarray(rgb)
    if v.turn:
        image = np.ascontiguousarray(np.rot90(image, -v.turn // 90))
    if v.faint:
        image = _faint(image)
    return Derived(_png(image, dpi if v.meta else None), f"{doc.id}.png", image, dpi, v.meta)
