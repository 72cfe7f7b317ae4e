"""What a process does with freed memory: engines give page buffers back after each page, and the
embedded CLI puts peak memory before CPU (glibc only; elsewhere these do nothing).

Here rather than beside the engines because the CLI (apps) chooses the policy and the engines
and their setup (workers) follow it; neither side imports the other."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

# glibc's mallopt parameter number for the mmap threshold (malloc.h).
_M_MMAP_THRESHOLD = -3
_memory_first = False


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


def return_large_buffers(threshold: int) -> bool:
    """Serve allocations of ``threshold`` bytes or more with their own mappings (glibc only), and
    mark this process memory-first (``memory_first``).

    Fixing the threshold also stops glibc from raising it on its own, which is what lets freed
    page images and model buffers pile up in the heap. False, and nothing changed, where there is
    no glibc (macOS, musl) or the threshold is 0."""
    global _memory_first
    libc = _libc()
    if threshold <= 0 or libc is None:
        return False
    try:
        done = bool(libc.mallopt(_M_MMAP_THRESHOLD, threshold))
    except (AttributeError, TypeError):
        return False
    _memory_first = _memory_first or done
    return done


def memory_first() -> bool:
    """Whether this process chose peak memory over CPU (``return_large_buffers`` took effect): the
    embedded CLI on a laptop does; workers keep the allocators' defaults (throughput first)."""
    return _memory_first
