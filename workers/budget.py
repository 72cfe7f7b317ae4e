"""What a document may cost: each page's CPU seconds, memory and characters in ingest (a PDF
page read or drawn, an image frame decoded).

A PDF's size says little about the work it asks for: a 40 KB file can hold a content stream that
inflates to megabytes of text operators, and a small form drawn a million times costs the same
without any large stream at all. Checking stream lengths before extraction misses the second
kind, so the budget is enforced where the work happens instead: the pages of a document are read
(text layer, or rendered to an image) in a forked child process whose address space is capped
(``RLIMIT_AS``) and whose CPU time per page is capped (``ITIMER_PROF``, whose default action ends
the process). A child that dies or overruns costs its budget once and ends the job with
``input:too-complex``; the worker process itself, its database connection and the other
tenants' messages behind it are untouched.

A worker can still die in a job-wide stage (the pod's memory limit, a hard time limit, a crash in
a library): that is counted on the job row (``apps.jobs.services.claim_attempt``).

The child never touches the database or storage: it hands each page back through a pipe, and the
caller (``workers.ingest``) writes it. It leaves with ``os._exit`` so that nothing inherited (the
database socket above all) is closed or flushed on the parent's behalf.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import pickle
import resource
import select
import signal
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apps.jobs.documents import (
    PDF_STORE_EVERY,
    InputError,
    decode_frame,
    encode_png,
    open_image,
    open_pdf,
    release_pdf_cache,
    render_pdf_page,
)
from ocrsite.memory import release_freed_memory
from ocrsite.vocabulary import ErrorCode, PageFlag
from workers.content import orientation
from workers.engines import textlayer

log = logging.getLogger(__name__)

_HEADER = struct.Struct("!Q")
_PR_SET_PDEATHSIG = 1  # linux/prctl.h


@dataclass(frozen=True)
class PageBudget:
    """Limits on one page's work in ingest (settings ``OCR_PAGE_*``)."""

    cpu_s: float = 30.0
    memory_bytes: int = 1024 * 1024 * 1024
    max_chars: int = 200_000
    # The wall-clock wait for one page, a backstop for a child that sleeps or blocks rather than
    # computes (the CPU timer does not tick then). Generous: a busy machine is not the page's fault.
    wall_s: float = 300.0


@dataclass(frozen=True)
class TextPage:
    """A page read from its text layer."""

    index: int
    size_pt: tuple[float, float]
    read: textlayer.TextLayerPage
    read_ms: int


@dataclass(frozen=True)
class ImagePage:
    """A page without a usable text layer, rendered for OCR (PNG bytes)."""

    index: int
    size_pt: tuple[float, float]
    png: bytes
    dpi: int
    width: int
    height: int
    rotation: int = 0  # the clockwise turn the scan stood at; the PNG is upright
    flags: tuple[str, ...] = ()  # what the orientation check could not confirm (PageFlag)


@dataclass(frozen=True)
class PageRequest:
    """What ingest wants of each page: the text layer when it has one, else (or if forced) an image."""

    dpi: int
    max_pixels: int
    min_chars: int
    force_ocr: bool
    text_layer: textlayer.TextLayerConfig
    # What reads a scanned page to find which way is up (built in the worker before the child is
    # forked: the child reuses its models). None: pages are stored as rendered.
    reader: orientation.LineReader | None = None


def read_pdf_pages(
    source: bytes | str, indices: Sequence[int], request: PageRequest, budget: PageBudget
) -> Iterator[TextPage | ImagePage]:
    """The pages ``indices`` of the PDF ``source`` (its bytes, or a file's path), in that order, each read within ``budget``.

    Raises ``InputError`` with ``input:too-complex`` for the first page that exceeds its budget,
    or with the code the page's own reading raised (an image past the pixel cap, say).
    """
    if not indices:
        return
    yield from _in_child(lambda send: _read_pages(source, indices, request, budget, send), budget, pdf=True)


def _read_pages(source: bytes | str, indices: Sequence[int], request: PageRequest, budget: PageBudget, send) -> None:
    with open_pdf(source) as doc:
        for n, index in enumerate(indices):
            if n % PDF_STORE_EVERY == 0:
                # MuPDF keeps what it parsed of earlier pages; the child's memory is capped.
                release_pdf_cache()
            # Re-armed per page: each page gets its own CPU seconds, whatever the ones before used.
            signal.setitimer(signal.ITIMER_PROF, budget.cpu_s)
            page = doc[index]
            send(("page", index))
            started = time.perf_counter()
            size_pt = (page.rect.width, page.rect.height)
            if not request.force_ocr and textlayer.has_text_layer(page, request.min_chars):
                read = textlayer.read_page(page, request.dpi, request.text_layer)
                chars = sum(len(text.text) for _, text in read.regions)
                if chars > budget.max_chars:
                    raise InputError(
                        ErrorCode.INPUT_TOO_COMPLEX,
                        f"page {index + 1} holds {chars} characters of text; the limit is {budget.max_chars}",
                    )
                send(TextPage(index, size_pt, read, int((time.perf_counter() - started) * 1000)))
                continue
            image, used_dpi = render_pdf_page(page, request.dpi, request.max_pixels)
            # Turned upright here, under the page's budget: layout, recognition and the console
            # all read the upright page.
            image, found = upright_page(image, request.reader)
            if found.rotation % 180:
                size_pt = (size_pt[1], size_pt[0])
            send(
                ImagePage(
                    index,
                    size_pt,
                    encode_png(image),
                    used_dpi,
                    image.shape[1],
                    image.shape[0],
                    found.rotation,
                    found.flags,
                )
            )
            # A scanned page's decoded image is of no use to the next page, and 25 of them fill
            # MuPDF's store to its 256 MB cap: this child then peaked at 427 MiB on a scanned PDF
            # of 30 pages or more, against 217 emptied after each rendered page (200 dpi).
            del image
            release_pdf_cache()
        signal.setitimer(signal.ITIMER_PROF, 0)


def upright_page(image, reader: orientation.LineReader | None) -> tuple[Any, orientation.Orientation]:
    """A scanned page turned upright when its reading confirms the turn (``workers.content.orientation``)."""
    if reader is None:
        return image, orientation.Orientation(0)
    try:
        found = orientation.upright(image, reader)
    except Exception:
        # The check is ours, not the document's: the page decoded within its budget, and a model
        # that fails on it (CI once saw an onnxruntime error here that no machine of ours repeats)
        # must not fail the document as input:corrupt. It stays as rendered, flagged, and the
        # worker's log says why, with what the child had mapped against its cap.
        log.warning(
            "orientation check failed; page left as rendered, flagged %s (mapped %d MB of a %d MB cap)",
            PageFlag.ORIENTATION_UNSURE,
            _mapped_bytes() >> 20,
            resource.getrlimit(resource.RLIMIT_AS)[0] >> 20,
            exc_info=True,
        )
        found = (image, orientation.Orientation(0, unsure=True))
    # The check's crops and tensors are freed but glibc keeps them: ~30 MB a check, handed back.
    release_freed_memory()
    return found


# Images without a DPI tag: the common scanner default.
DEFAULT_SCAN_DPI = 300


def read_image_frames(
    source: bytes | str,
    indices: Sequence[int],
    max_pixels: int,
    budget: PageBudget,
    reader: orientation.LineReader | None = None,
) -> Iterator[ImagePage]:
    """The frames ``indices`` of the image ``source`` (bytes or a path), in increasing order,
    each decoded, turned upright (``reader``, as PDF pages are) and encoded within ``budget`` in
    the same kind of child as PDF pages: a progressive JPEG whose scans repeat, an animation
    whose frames are each drawn on a huge canvas or a TIFF of thousands of frames ends as
    ``input:too-complex`` when a frame passes its CPU seconds or memory, never by the stage's
    time limit. One open image serves every frame, so the n-th frame costs one decode, not n."""
    if not indices:
        return
    yield from _in_child(
        lambda send: _read_frames(source, sorted(indices), max_pixels, budget, reader, send), budget, pdf=False
    )


def _read_frames(
    source: bytes | str,
    indices: Sequence[int],
    max_pixels: int,
    budget: PageBudget,
    reader: orientation.LineReader | None,
    send,
) -> None:
    with open_image(source) as img:
        for index in indices:
            signal.setitimer(signal.ITIMER_PROF, budget.cpu_s)
            send(("page", index))
            image, dpi = decode_frame(img, index, max_pixels)
            dpi = dpi or DEFAULT_SCAN_DPI
            size_pt = (image.shape[1] * 72 / dpi, image.shape[0] * 72 / dpi)
            # Layout and recognition read text upright only: a scan at 90, 180 or 270 degrees is
            # stored turned back when reading it confirms the turn, as PDF pages are.
            image, found = upright_page(image, reader)
            if found.rotation % 180:
                size_pt = (size_pt[1], size_pt[0])
            send(
                ImagePage(
                    index,
                    size_pt,
                    encode_png(image),
                    dpi,
                    image.shape[1],
                    image.shape[0],
                    found.rotation,
                    found.flags,
                )
            )
            del image
        signal.setitimer(signal.ITIMER_PROF, 0)


def _in_child(work: Callable[[Callable[[Any], None]], None], budget: PageBudget, *, pdf: bool) -> Iterator[Any]:
    """Run ``work(send)`` in a forked child under ``budget``; yield what it sends, in order.
    ``pdf``: the work reads a PDF (PyMuPDF is loaded before the fork), not an image (Pillow only).

    The child announces each page (``("page", index)``) before reading it, so when it dies the
    parent knows which page killed it.
    """
    _libraries_loaded(pdf)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_fd)
        code = 0
        try:
            _limit_child(budget)
            with os.fdopen(write_fd, "wb") as out:

                def send(item: Any) -> None:
                    blob = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
                    out.write(_HEADER.pack(len(blob)) + blob)
                    out.flush()

                try:
                    work(send)
                    send(("end",))
                except InputError as exc:
                    send(("input-error", exc.code, exc.message))
                except MemoryError:
                    send(("too-complex", "more memory than its budget"))
                except RecursionError:
                    send(("too-complex", "objects nested deeper than a reader follows"))
                except Exception as exc:
                    if _out_of_memory(exc):  # MuPDF's own allocation failure, raised as its error type
                        send(("too-complex", "more memory than its budget"))
                    elif _too_deep(exc):  # MuPDF's "exception stack overflow": forms drawing forms
                        send(("too-complex", "objects nested deeper than a reader follows"))
                    else:  # a library's error on these bytes: the document's fault, never retried
                        send(("input-error", str(ErrorCode.INPUT_CORRUPT), f"{type(exc).__name__}: {exc}"))
        except BaseException:
            code = 1
        finally:
            os._exit(code)

    os.close(write_fd)
    page: int | None = None
    reader = _Reader(read_fd, budget.wall_s)
    try:
        while True:
            try:
                item = reader.next()
            except TimeoutError:
                raise _too_complex(page, f"no answer in {budget.wall_s:.0f} s") from None
            if item is None:  # the child died (CPU timer, memory, a crash in the C library)
                raise _too_complex(page, f"its reading was stopped ({_exit_reason(pid)})")
            if isinstance(item, tuple):
                kind = item[0]
                if kind == "page":
                    page = item[1]
                elif kind == "end":
                    return
                elif kind == "input-error":
                    raise InputError(item[1], item[2])
                elif kind == "too-complex":
                    raise _too_complex(page, item[1])
                else:
                    raise RuntimeError(f"reading page {page} failed: {item[1]}")
            else:
                yield item
    finally:
        reader.close()
        _reap(pid)


class _Reader:
    """Length-prefixed pickles from the child's pipe, each awaited at most ``wall_s``."""

    def __init__(self, fd: int, wall_s: float) -> None:
        self.fd = fd
        self.wall_s = wall_s

    def next(self) -> Any:
        header = self._exactly(_HEADER.size)
        if header is None:
            return None
        blob = self._exactly(_HEADER.unpack(header)[0])
        return None if blob is None else pickle.loads(blob)

    def _exactly(self, n: int) -> bytes | None:
        chunks: list[bytes] = []
        deadline = time.monotonic() + self.wall_s
        while n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise TimeoutError("the page reader sent nothing within its wall-clock budget")
            chunk = os.read(self.fd, min(n, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        os.close(self.fd)


def _libraries_loaded(pdf: bool) -> None:
    """The libraries a page reader uses, imported in the worker before it forks, so that each
    child shares them and its budget pays for the page alone. Importing PyMuPDF maps about 340 MB
    of address space (it brings pymupdf4llm along): a child that imported it itself had ~40 MB of
    a 384 MB budget left, and CI failed a bystander's one-line scan there, its orientation check
    out of memory, as ``input:corrupt`` (an import that fails for want of memory reads as "No
    module named 'mupdf'"). An image reader never touches PyMuPDF, so a process that only reads
    images (``manage.py ocr scan.png``: ~0.5 CPU-s of its start) does not import it. Pillow's
    format plugins load on the first open: loaded here too."""
    if pdf:
        import pymupdf  # noqa: F401 - the import is the point
    from PIL import Image

    Image.init()


def _limit_child(budget: PageBudget) -> None:
    # The default action of SIGPROF ends the process: no handler can be postponed by C code.
    signal.signal(signal.SIGPROF, signal.SIG_DFL)
    # If the worker dies (a hard time limit, the pod's memory limit), its reader goes with it.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    # The child starts as a copy of the worker (interpreter, engines, libraries): its budget is
    # on top of what it already maps.
    cap = _mapped_bytes() + budget.memory_bytes
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# How C++ libraries word an allocation failure: MuPDF ("malloc (n bytes) failed"), onnxruntime and
# OpenCV (std::bad_alloc, "bad allocation", "Failed to allocate memory").
_OUT_OF_MEMORY = ("memory", "alloc (", "bad_alloc", "bad allocation")


def _mapped_bytes() -> int:
    """This process's address space (what ``RLIMIT_AS`` counts)."""
    return int(Path("/proc/self/statm").read_text().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _out_of_memory(exc: BaseException | None) -> bool:
    """An allocation failure, however the C library reported it (MuPDF's own error type, or a
    SystemError wrapping the MemoryError a binding raised while returning a result)."""
    seen = 0
    while exc is not None and seen < 8:
        text = f"{type(exc).__name__} {exc}".lower()
        if isinstance(exc, MemoryError) or any(sign in text for sign in _OUT_OF_MEMORY):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _too_deep(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "stack overflow" in text or "too deep" in text or "nesting" in text


def _too_complex(page: int | None, why: str) -> InputError:
    where = f"page {page + 1}" if page is not None else "the document"
    return InputError(ErrorCode.INPUT_TOO_COMPLEX, f"{where} costs more than its budget to read: {why}")


def _exit_reason(pid: int) -> str:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return "gone"
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return "CPU time" if sig == signal.SIGPROF else signal.Signals(sig).name
    return f"exit {os.WEXITSTATUS(status)}"


def _reap(pid: int) -> None:
    """The child is gone when this returns: killed if it still runs (the parent stopped early)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except ChildProcessError:
        pass
