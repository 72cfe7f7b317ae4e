"""Freed page buffers go back to the system once a page is read."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def release_freed_memory() -> None:
    """Return the heap's free pages to the system (glibc's malloc_trim; nothing elsewhere).

    A page's tensors and crops are tens to hundreds of MB, freed when it is read; glibc keeps
    freed memory in its heap. A worker OCRing the same two scans round after round grew ~15 MB a
    round without the trim and ~8 MB with it (the rest was MuPDF's resource store, which ingest now
    leaves behind in its short-lived page-reading child: workers/budget.py). Milliseconds a page.
    """
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
