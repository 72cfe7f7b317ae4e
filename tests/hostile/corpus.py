"""The hostile corpus: every file is written by code here (pymupdf, Pillow, byte surgery), plus
the two bad_* files in ../shared/data/dev. Each case states the outcome the platform must give:

- ``Refused(status, code)``: refused at the door, with that HTTP status and error code;
- ``Failed(code)``: accepted (202), then the job fails with that code in the worker;
- ``Done()``: accepted and processed normally (nothing in the file is executed or extracted).

``python -m tests.hostile.corpus OUTDIR`` writes the files, and prints the table of outcomes.
"""

from __future__ import annotations

import io
import struct
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf
from PIL import Image, ImageDraw

SHARED_DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "dev"
SECRET = b"EMBEDDED-SECRET-0xC0FFEE"


@dataclass(frozen=True)
class Refused:
    status: int
    code: str

    def __str__(self) -> str:
        return f"{self.status} {self.code}"


@dataclass(frozen=True)
class Failed:
    code: str

    def __str__(self) -> str:
        return f"202, then job failed {self.code}"


@dataclass(frozen=True)
class Done:
    def __str__(self) -> str:
        return "202, then job done"


@dataclass(frozen=True)
class Case:
    name: str  # also the upload's file name unless ``filename`` is given
    make: Callable[[], bytes]
    expect: Refused | Failed | Done
    why: str
    filename: str | None = None
    settings: dict = field(default_factory=dict)  # overrides for the web process only

    @property
    def upload_name(self) -> str:
        return self.filename if self.filename is not None else self.name


# --- builders --------------------------------------------------------------------------------------


def text_pdf(
    text: str = "A born-digital page whose text layer is long enough to skip OCR entirely.",
    pages: int = 1,
    size: tuple[float, float] = (612, 792),
) -> bytes:
    doc = pymupdf.open()
    for i in range(pages):
        page = doc.new_page(width=size[0], height=size[1])
        page.insert_text((72, 72), f"{text} Page {i + 1}.", fontsize=11)
    # Same text, same bytes: no creation date, no fresh /ID (idempotency tests compare hashes).
    doc.set_metadata({})
    return doc.tobytes(no_new_id=True)


def inflating_text_pdf(stream_mb: float) -> bytes:
    """One page whose content stream inflates to ``stream_mb`` MB of text operators (a 15 MB stream
    is a ~45 KB file, 64 MB ~200 KB): small at the door, ruinous to extract without a budget."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "x")  # gives the page a font resource the operators can name
    font = page.get_fonts()[0][4]
    unit = f"BT /{font} 1 Tf 10 10 Td (AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA) Tj ET\n".encode()
    doc.update_stream(page.get_contents()[0], unit * int(stream_mb * 1024 * 1024 / len(unit)), compress=True)
    return doc.tobytes(garbage=3, deflate=True)


def text_png(text: str = "POLYGLOT PNG TEXT", size: tuple[int, int] = (480, 120)) -> bytes:
    image = Image.new("L", size, 255)
    ImageDraw.Draw(image).text((20, 40), text, fill=0, font_size=36)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def text_jpeg() -> bytes:
    buf = io.BytesIO()
    Image.open(io.BytesIO(text_png("TRUNCATED JPEG", (900, 600)))).convert("RGB").save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_claiming(width: int, height: int) -> bytes:
    """A well-formed PNG whose header claims ``width``×``height`` but carries one byte of data."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", zlib.compress(b"\0"))
        + _png_chunk(b"IEND", b"")
    )


def png_bomb(side: int = 10_000) -> bytes:
    """A real decompression bomb: side² white grayscale pixels deflated to ~100 KB."""
    ihdr = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    comp = zlib.compressobj(9)
    row = b"\0" + b"\xff" * side
    parts = [comp.compress(row * 500) for _ in range(side // 500)]
    parts.append(comp.flush())
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", b"".join(parts))
        + _png_chunk(b"IEND", b"")
    )


def jpeg_claiming(width: int, height: int) -> bytes:
    """A JPEG whose SOF0 marker says ``width``×``height`` (the scan data is a tiny image's)."""
    data = bytearray(text_jpeg())
    sof = data.find(b"\xff\xc0")
    struct.pack_into(">HH", data, sof + 5, height, width)
    return bytes(data)


def bmp_claiming(width: int, height: int) -> bytes:
    header = b"BM" + struct.pack("<IHHI", 54, 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, 0, 2835, 2835, 0, 0)
    return header + info


def tiff_with_huge_second_frame() -> bytes:
    """A 2-page TIFF: page 1 is 40×40, page 2's header claims 100000×100000 pixels."""
    buf = io.BytesIO()
    first, second = Image.new("L", (40, 40), 255), Image.new("L", (41, 41), 255)
    first.save(buf, format="TIFF", save_all=True, append_images=[second])
    data = bytearray(buf.getvalue())
    for tag in (256, 257):  # ImageWidth, ImageLength of the second IFD (value 41)
        for typ, fmt in ((3, "<HHIHH"), (4, "<HHII")):
            needle = struct.pack(fmt, tag, typ, 1, 41, 0) if typ == 3 else struct.pack(fmt, tag, typ, 1, 41)
            at = data.rfind(needle)
            if at >= 0:
                data[at : at + 12] = struct.pack("<HHII", tag, 4, 1, 100_000)
                break
        else:
            raise RuntimeError(f"tag {tag} not found in the second IFD")
    return bytes(data)


def encrypted_pdf(user_pw: str | None) -> bytes:
    doc = pymupdf.open(stream=text_pdf(), filetype="pdf")
    return doc.tobytes(
        encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner-secret", user_pw=user_pw or "", permissions=0
    )


def zero_page_pdf() -> bytes:
    """A syntactically valid PDF whose page tree is empty (byte offsets computed, not guessed)."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"]
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def broken_xref_pdf() -> bytes:
    """A good PDF whose xref table and startxref point at the wrong bytes (MuPDF repairs it)."""
    data = text_pdf("Broken cross-reference table, repaired by the reader and processed normally.")
    data = data.replace(b"startxref\n", b"startxref\n9")  # an offset past the end of the file
    at = data.find(b"xref\n0 ")
    if at >= 0:
        data = data[:at] + b"xref\n0 " + b"9" + data[at + 7 :]
    return data


def javascript_and_attachment_pdf() -> bytes:
    """Opens with a JavaScript action, has a JavaScript link, and carries an embedded file."""
    doc = pymupdf.open(
        stream=text_pdf("This page carries JavaScript and an attachment; only its pixels count."), filetype="pdf"
    )
    catalog = doc.pdf_catalog()
    js = doc.get_new_xref()
    doc.update_object(js, "<< /S /JavaScript /JS (app.alert\\('pwned'\\); this.exportDataObject\\({cName: 'x'}\\);) >>")
    doc.xref_set_key(catalog, "OpenAction", f"{js} 0 R")
    doc.embfile_add("payload.txt", SECRET, filename="payload.txt")
    page = doc[0]
    page.insert_link({"kind": pymupdf.LINK_URI, "from": pymupdf.Rect(72, 100, 300, 120), "uri": "javascript:alert(1)"})
    return doc.tobytes()


def pdf_image_bomb(side: int = 12_000) -> bytes:
    """One page drawing a side×side grayscale image (144 M pixels) deflated to ~140 KB.

    Unlike an image upload this is not refused: MuPDF decodes a page's images subsampled to the
    render size, so the page renders in milliseconds and bounded memory (measured: 0.05 s for
    20000², peak RSS 157 MB). The test keeps that true."""
    comp = zlib.compressobj(6)
    row = b"\xff" * side
    stream = b"".join([comp.compress(row * 500) for _ in range(side // 500)] + [comp.flush()])
    doc = pymupdf.open()
    page = doc.new_page()
    image = doc.get_new_xref()
    doc.update_object(
        image,
        f"<< /Type /XObject /Subtype /Image /Width {side} /Height {side} /BitsPerComponent 8 "
        f"/ColorSpace /DeviceGray /Filter /FlateDecode /Length {len(stream)} >>",
    )
    doc.update_stream(image, stream, compress=False)
    doc.xref_set_key(page.xref, "Resources", f"<< /XObject << /Im0 {image} 0 R >> >>")
    contents = doc.get_new_xref()
    doc.update_object(contents, "<<>>")
    doc.update_stream(contents, b"q 612 0 0 792 0 0 cm /Im0 Do Q")
    doc.xref_set_key(page.xref, "Contents", f"{contents} 0 R")
    return doc.tobytes()


# --- bombs of work (issue 35): small files that ask a decoder or a reader for minutes ----------------


def progressive_jpeg(side: int = 2000, scans: int = 1000) -> bytes:
    """A flat progressive JPEG whose last scan repeats ``scans`` times: a decoder makes one pass
    over every coefficient per scan (the issue's had 40,000 scans and ran ~80 s in ingest)."""
    img = Image.new("L", (side, side), 200)
    buf = io.BytesIO()
    img.save(buf, "JPEG", progressive=True, quality=90)
    data = buf.getvalue()
    last = data.rfind(b"\xff\xda")  # the last scan: its SOS segment and entropy-coded data
    return data[:-2] + data[last:-2] * (scans - data.count(b"\xff\xda")) + b"\xff\xd9"


def _riff_chunk(tag: bytes, data: bytes) -> bytes:
    return tag + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")


def animated_webp(canvas: tuple[int, int] = (4000, 4000), frames: int = 1500) -> bytes:
    """An animated WebP of ``frames`` one-pixel frames on a large canvas, by byte surgery: each
    frame is composited onto the whole canvas (0.2 s a frame at 4000x4000 here), and a decoder
    asked for frame n decodes every frame before it (the issue's ran ~100 s; 6000x6000 x 5000
    frames ran the whole 600 s ingest limit)."""
    one = io.BytesIO()
    Image.new("RGB", (1, 1), "white").save(one, "WEBP", lossless=True)
    raw = one.getvalue()
    vp8l = raw[12 : 20 + struct.unpack("<I", raw[16:20])[0]]
    vp8l += b"\0" * (len(vp8l) % 2)
    w, h = canvas
    vp8x = _riff_chunk(b"VP8X", b"\x02\0\0\0" + (w - 1).to_bytes(3, "little") + (h - 1).to_bytes(3, "little"))
    anim = _riff_chunk(b"ANIM", struct.pack("<IH", 0xFFFFFFFF, 0))
    # Each frame: 1x1 at (0, 0), 100 ms, no blending, no disposal.
    frame = _riff_chunk(b"ANMF", b"\0" * 12 + (100).to_bytes(3, "little") + b"\x02" + vp8l)
    body = b"WEBP" + vp8x + anim + frame * frames
    return b"RIFF" + struct.pack("<I", len(body)) + body


def many_frame_tiff(frames: int = 5000, side: int = 64) -> bytes:
    """A TIFF of ``frames`` small white pages: reopened for each page, frame n walked n IFDs
    (the issue's 5,000 frames delayed another tenant 113 s, even after a cancel)."""
    pages = [Image.new("L", (side, side), 255)] * frames
    buf = io.BytesIO()
    pages[0].save(buf, "TIFF", save_all=True, append_images=pages[1:], compression="packbits")
    return buf.getvalue()


def shared_annots_pdf(pages: int = 20, entries: int = 1_600_000) -> bytes:
    """``pages`` empty pages sharing one ``/Annots`` array of ``entries`` references: loading a
    page reads its annotations (the issue's 10 MB file held a web thread 66-300 s per POST)."""
    doc = pymupdf.open()
    # Made first, so its number is short ("3 0 R "): 1.6M references then fit the 10 MB door.
    annot = doc.get_new_xref()
    for _ in range(pages):
        doc.new_page()
    doc.update_object(annot, "<< /Type /Annot /Subtype /Text /Rect [0 0 10 10] >>")
    array = doc.get_new_xref()
    doc.update_object(array, "[" + f"{annot} 0 R " * entries + "]")
    for number in range(pages):
        doc.xref_set_key(doc[number].xref, "Annots", f"{array} 0 R")
    return doc.tobytes()


def nested_forms_pdf(depth: int = 5000) -> bytes:
    """One page drawing a Form XObject that draws the next, ``depth`` deep (the issue's jobs were
    still ``running`` when the probe ended)."""
    doc = pymupdf.open()
    page = doc.new_page()
    forms = [doc.get_new_xref() for _ in range(depth)]
    for n, xref in enumerate(forms):
        if n + 1 < depth:
            doc.update_object(
                xref,
                f"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /XObject << /X {forms[n + 1]} 0 R >> >> >>",
            )
            doc.update_stream(xref, b"q /X Do Q")
        else:
            doc.update_object(xref, "<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] >>")
            doc.update_stream(xref, b"0 0 m 10 10 l S")
    resources = doc.get_new_xref()
    doc.update_object(resources, f"<< /XObject << /X {forms[0]} 0 R >> >>")
    doc.xref_set_key(page.xref, "Resources", f"{resources} 0 R")
    contents = doc.get_new_xref()
    doc.update_object(contents, "<<>>")
    doc.update_stream(contents, b"q /X Do Q")
    doc.xref_set_key(page.xref, "Contents", f"{contents} 0 R")
    return doc.tobytes()


def text_tiff(pages: int, words: str = "Fair dispatch keeps tenants apart") -> bytes:
    """``pages`` small pages of printed text, quick to OCR (the dev set's scans may be absent)."""
    frames = []
    for n in range(pages):
        img = Image.new("L", (900, 160), 255)
        ImageDraw.Draw(img).text((20, 60), f"{words} page {n + 1}", fill=0, font_size=36)
        frames.append(img)
    buf = io.BytesIO()
    frames[0].save(buf, "TIFF", save_all=True, append_images=frames[1:], dpi=(300, 300))
    return buf.getvalue()


def truncated(data: bytes, keep: float) -> bytes:
    return data[: int(len(data) * keep)]


def shared(name: str) -> Callable[[], bytes]:
    return lambda: (SHARED_DEV / name).read_bytes()


def _multi_page_source() -> bytes:
    path = SHARED_DEV / "multi_page.pdf"
    return path.read_bytes() if path.exists() else text_pdf(pages=5)


# --- the corpus --------------------------------------------------------------------------------------

CASES: list[Case] = [
    # Empty and unknown bytes
    Case("bad_empty.pdf", shared("bad_empty.pdf"), Refused(422, "input:empty"), "zero-byte file (shared/data/dev)"),
    Case("empty.png", lambda: b"", Refused(422, "input:empty"), "zero bytes with an image name"),
    Case(
        "random.pdf",
        lambda: bytes((i * 7919 + 13) % 251 for i in range(4096)),
        Refused(415, "input:unsupported-type"),
        "noise named .pdf: the type comes from the bytes",
    ),
    Case(
        "image.gif",
        lambda: (
            b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,"
            b"\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
        ),
        Refused(415, "input:unsupported-type"),
        "GIF is not accepted",
    ),
    Case("archive.zip", lambda: b"PK\x03\x04" + b"\0" * 200, Refused(415, "input:unsupported-type"), "ZIP archive"),
    Case(
        "program.pdf",
        lambda: b"\x7fELF\x02\x01\x01" + b"\0" * 500,
        Refused(415, "input:unsupported-type"),
        "ELF executable named .pdf",
    ),
    Case(
        "drawing.svg",
        lambda: b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
        Refused(415, "input:unsupported-type"),
        "SVG with a script",
    ),
    # PDFs
    Case(
        "bad_password-example.pdf",
        shared("bad_password-example.pdf"),
        Refused(422, "input:encrypted"),
        "needs a user password (shared/data/dev)",
    ),
    Case(
        "encrypted_aes256.pdf",
        lambda: encrypted_pdf("user-secret"),
        Refused(422, "input:encrypted"),
        "AES-256 with a user password",
    ),
    Case(
        "permissions_only.pdf",
        lambda: encrypted_pdf(None),
        Done(),
        "owner password only: readable without a password, so processed",
    ),
    Case("zero_pages.pdf", zero_page_pdf, Refused(422, "input:empty"), "valid PDF with an empty page tree"),
    Case("broken_xref.pdf", broken_xref_pdf, Done(), "xref offsets wrong: repaired and processed"),
    Case(
        "truncated.pdf",
        lambda: truncated(_multi_page_source(), 0.35),
        Done(),
        "first 35% of a 5-page PDF: the repaired document's surviving pages are processed",
    ),
    Case(
        "header_only.pdf",
        lambda: b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n",
        Refused(422, "input:corrupt"),
        "a PDF header and nothing else",
    ),
    Case(
        "html_with_pdf_header.pdf",
        lambda: b"<html><body>%PDF-1.4 not really</body></html>" + b" " * 300,
        Refused(422, "input:corrupt"),
        "polyglot-ish: %PDF- in the first 1024 bytes of HTML",
    ),
    Case(
        "javascript_and_attachment.pdf",
        javascript_and_attachment_pdf,
        Done(),
        "OpenAction JavaScript, javascript: link, embedded file: rendered, nothing run or extracted",
    ),
    Case(
        "huge_mediabox.pdf",
        lambda: text_pdf(size=(20_000, 20_000)),
        Refused(422, "input:image-too-large"),
        "a 278-inch page would render past the pixel cap",
    ),
    Case(
        "six_pages.pdf",
        lambda: text_pdf(pages=6),
        Refused(422, "input:too-many-pages"),
        "over OCR_MAX_PAGES (5 for this case)",
        settings={"OCR_MAX_PAGES": 5},
    ),
    Case(
        "pdf_image_bomb.pdf",
        pdf_image_bomb,
        Done(),
        "a 12000x12000 image deflated to ~140 KB inside a page: decoded subsampled to the render size",
    ),
    Case(
        "polyglot_pdf_zip.pdf",
        lambda: text_pdf("A PDF with a ZIP archive glued to its end.") + b"PK\x03\x04" + b"\0" * 64,
        Done(),
        "PDF + ZIP polyglot: read as the PDF it starts as",
    ),
    # Images
    Case(
        "absurd_dimensions.png",
        lambda: png_claiming(100_000, 100_000),
        Refused(422, "input:image-too-large"),
        "PNG header claims 10^10 pixels",
    ),
    Case(
        "bomb.png",
        png_bomb,
        Refused(422, "input:image-too-large"),
        "10000x10000 pixels deflated to ~100 KB (decompression bomb)",
    ),
    Case(
        "absurd_dimensions.jpg",
        lambda: jpeg_claiming(65_000, 65_000),
        Refused(422, "input:image-too-large"),
        "JPEG SOF claims 65000x65000",
    ),
    Case(
        "absurd_dimensions.bmp",
        lambda: bmp_claiming(60_000, 60_000),
        Refused(422, "input:image-too-large"),
        "BMP header claims 60000x60000 and has no pixel data",
    ),
    Case(
        "huge_second_frame.tif",
        tiff_with_huge_second_frame,
        Refused(422, "input:image-too-large"),
        "page 1 is small, page 2 claims 100000x100000",
    ),
    Case(
        "truncated.png",
        lambda: truncated(text_png(), 0.6),
        Refused(422, "input:corrupt"),
        "PNG cut mid-IDAT: the checksum walk in the probe notices",
    ),
    Case(
        "truncated.jpg",
        lambda: truncated(text_jpeg(), 0.5),
        Failed("input:corrupt"),
        "JPEG cut in the scan data: only decoding notices, so the job fails in the worker",
    ),
    Case(
        "polyglot_png_pdf.png",
        lambda: text_png() + text_pdf("The PDF hidden after the PNG."),
        Done(),
        "PNG with a PDF appended: read as the PNG it starts as",
    ),
    # Bombs of work (issue 35): refused at the door by counting, or failed by the page budget
    Case(
        "progressive_scans.jpg",
        lambda: progressive_jpeg(1000, 2000),
        Refused(422, "input:too-complex"),
        "a progressive JPEG whose last scan repeats 2,000 times: scans are counted at the door",
    ),
    Case(
        "animation_canvas.webp",
        lambda: animated_webp((4000, 4000), 1500),
        Refused(413, "input:too-large"),
        "1,500 one-pixel frames on a 4000x4000 canvas: 2.4e10 pixels from 75 KB",
    ),
    Case(
        "nested_forms.pdf",
        lambda: nested_forms_pdf(5000),
        Failed("input:too-complex"),
        "Form XObjects nested 5,000 deep: MuPDF's stack overflow is the page's fault, at once",
    ),
    # Names: the stored name is ours; the client's is display text only
    Case("traversal", lambda: text_pdf(), Done(), "path traversal in the name", filename="../../../etc/passwd.pdf"),
    Case(
        "control",
        lambda: text_pdf(),
        Done(),
        "control characters and an ANSI escape in the name",
        filename="evil\x1b[31mred\x07\x7f\t.pdf",
    ),
    Case("unicode", lambda: text_pdf(), Done(), "Unicode name", filename="résumé 文書 \U0001f4c4.pdf"),
    Case("long_name", lambda: text_pdf(), Done(), "a 300-character name: kept to 255", filename="n" * 296 + ".pdf"),
    Case(
        "huge_name",
        lambda: text_pdf(),
        Refused(400, "request:malformed"),
        "a 2000-character name overflows the multipart header limit",
        filename="n" * 1996 + ".pdf",
    ),
]

# Expected display names after cleaning (services.clean_filename), for the name cases.
CLEAN_NAMES = {
    "traversal": "passwd.pdf",
    "control": "evil[31mred.pdf",
    "unicode": "résumé 文書 \U0001f4c4.pdf",
    "long_name": "n" * 251 + ".pdf",  # Django keeps the extension when it shortens a name
}


def main(outdir: str) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        (out / case.name).write_bytes(case.make())
        print(f"{case.name:32} {case.expect!s:40} {case.why}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "var/hostile")
