"""Make the corpus's multi-script pages: the Universal Declaration of Human Rights in fifteen
languages, set in Noto fonts as born-digital PDFs, with the text of each page as its ground truth.

Run by hand when the set changes (its output is committed; ``make eval`` never runs this):

    python -m bench.evaluation.make_udhr --udhr DIR [--out bench/corpus/files/udhr]

``DIR`` holds ``udhr_<code>.txt`` from the UDHR in Unicode project (unicode-corpus/udhr-in-unicode,
``data/txt``); the fonts come from Debian's ``fonts-noto-core`` and ``fonts-noto-cjk``, cut down
with fontTools (``pip install fonttools``: this tool's only extra) to the characters each
language uses, so a CJK page carries a few hundred glyphs, not a 20 MB collection. MuPDF's
HTML layout shapes the text (HarfBuzz: Arabic joining, Devanagari conjuncts) and sets Hebrew and
Arabic right to left. The truth is the text placed on the page, not the PDF's text layer: a
shaped Arabic or Devanagari text layer holds glyphs, not the letters a reader types.
"""

from __future__ import annotations

import argparse
import html
import tempfile
from pathlib import Path

import pymupdf

NOTO = Path("/usr/share/fonts/truetype/noto")
NOTO_CJK = Path("/usr/share/fonts/opentype/noto")
SERIF = (NOTO, "NotoSerif-Regular.ttf")
# code → (script, font folder and file [and face in a collection], right to left)
LANGUAGES = {
    "cmn_hans": ("chinese", (NOTO_CJK, "NotoSansCJK-Regular.ttc", 2), False),
    "cmn_hant": ("chinese", (NOTO_CJK, "NotoSerifCJK-Regular.ttc", 3), False),
    "jpn": ("japanese", (NOTO_CJK, "NotoSansCJK-Regular.ttc", 0), False),
    "kor": ("korean", (NOTO_CJK, "NotoSansCJK-Regular.ttc", 1), False),
    "rus": ("cyrillic", SERIF, False),
    "ukr": ("cyrillic", (NOTO, "NotoSans-Regular.ttf"), False),
    "bul": ("cyrillic", SERIF, False),
    "arb": ("arabic", (NOTO, "NotoNaskhArabic-Regular.ttf"), True),
    "heb": ("hebrew", (NOTO, "NotoSerifHebrew-Regular.ttf"), True),
    "hin": ("devanagari", (NOTO, "NotoSansDevanagari-Regular.ttf"), False),
    "mar": ("devanagari", (NOTO, "NotoSerifDevanagari-Regular.ttf"), False),
    "vie": ("latin-diacritics", SERIF, False),
    "pol": ("latin-diacritics", (NOTO, "NotoSans-Regular.ttf"), False),
    "ces": ("latin-diacritics", SERIF, False),
    "tur": ("latin-diacritics", (NOTO, "NotoSans-Regular.ttf"), False),
}
A4 = (595, 842)
# The Chinese poster: a page the size of the 4578×8647 px page at 200 dpi.
POSTER = (1648, 3113)


def paragraphs(path: Path) -> list[str]:
    """The declaration's lines after the project's header (which ends with a line of dashes)."""
    text = path.read_text(encoding="utf-8")
    body = text.split("\n---\n", 1)[1] if "\n---\n" in text else text
    return [" ".join(line.split()) for line in body.splitlines() if line.strip()]


def _html(paras: list[str], rtl: bool) -> str:
    attr = ' dir="rtl"' if rtl else ""
    return "".join(f"<p{attr}>{html.escape(p)}</p>" for p in paras)


def _fits(paras, font, rtl, size, page_size, margin) -> bool:
    scratch = pymupdf.open()
    page = scratch.new_page(width=page_size[0], height=page_size[1])
    spare, _scale = _place(page, paras, font, rtl, size, margin)
    scratch.close()
    return spare >= 0


def small_font(font: tuple, text: str, folder: Path) -> tuple:
    """The font cut down to the characters of ``text`` (one face of a collection), in ``folder``."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    src = Path(font[0]) / font[1]
    face = TTFont(src, fontNumber=font[2] if len(font) > 2 else -1, lazy=False)
    options = subset.Options()
    options.layout_features = ["*"]  # keep shaping (Arabic joining, Devanagari conjuncts)
    options.name_IDs = ["*"]
    # CID-keyed CJK fonts: MuPDF draws a CID through the CFF charset, so glyph ids must keep their
    # original numbers (renumbered, every CJK glyph drew as another or nothing).
    options.retain_gids = True
    sub = subset.Subsetter(options)
    sub.populate(text=text + " 0123456789")
    sub.subset(face)
    out = folder / (src.stem + (f"-{font[2]}" if len(font) > 2 else "") + ".otf")
    face.save(out)
    return (folder, out.name)


def _place(page, paras, font, rtl, size, margin):
    folder, name = font[:2]
    css = f"@font-face {{font-family: body; src: url({name});}} body {{font-family: body; font-size: {size}pt;}}"
    rect = pymupdf.Rect(margin, margin, page.rect.width - margin, page.rect.height - margin)
    return page.insert_htmlbox(rect, _html(paras, rtl), css=css, archive=pymupdf.Archive(str(folder)), scale_low=1)


def set_pages(paras, font, rtl, *, pages, size, page_size, margin=56) -> tuple[pymupdf.Document, list[list[str]]]:
    """Fill up to ``pages`` pages, each with as many whole paragraphs as fit."""
    doc, placed, rest = pymupdf.open(), [], list(paras)
    while rest and len(placed) < pages:
        take = 1
        while take < len(rest) and _fits(rest[: take + 1], font, rtl, size, page_size, margin):
            take += 1
        chunk, rest = rest[:take], rest[take:]
        page = doc.new_page(width=page_size[0], height=page_size[1])
        _place(page, chunk, font, rtl, size, margin)
        placed.append(chunk)
    return doc, placed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evaluation.make_udhr")
    parser.add_argument("--udhr", type=Path, required=True, help="folder of udhr_<code>.txt")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "corpus/files/udhr")
    parser.add_argument("--pages", type=int, default=2)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(code, code, A4, 11, args.pages) for code in LANGUAGES]
    jobs.append(("cmn_hans", "cmn_hans-poster", POSTER, 9, 1))
    fonts = Path(tempfile.mkdtemp(prefix="udhr-fonts-"))
    for code, name, page_size, size, pages in jobs:
        _script, font, rtl = LANGUAGES[code]
        paras = paragraphs(args.udhr / f"udhr_{code}.txt")
        font = small_font(font, "".join(paras), fonts)
        doc, placed = set_pages(paras, font, rtl, pages=pages, size=size, page_size=page_size)
        doc.set_metadata({"title": f"UDHR ({code}), corpus page set in Noto", "producer": "bench.evaluation.make_udhr"})
        doc.save(args.out / f"udhr_{name}.pdf", garbage=4, deflate=True)
        for i, chunk in enumerate(placed, 1):
            (args.out / f"udhr_{name}-p{i}.txt").write_text("\n".join(chunk) + "\n", encoding="utf-8")
        print(f"udhr_{name}: {len(placed)} page(s), {(args.out / f'udhr_{name}.pdf').stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
