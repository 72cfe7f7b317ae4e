"""A job's page selection: ``pages=1-50,75`` (1-based, inclusive, as people number pages).

Checked twice: its syntax at the door (before any bytes are read) and against the document's
page count once the probe knows it. Ingest then renders only the pages selected.
"""

from __future__ import annotations

import re

from apps.jobs.documents import InputError
from ocrsite.vocabulary import ErrorCode

_PART = re.compile(r"(\d{1,7})(?:-(\d{1,7}))?")
# Parts in one spec: enough for any hand-written selection, bounded for a hostile one.
MAX_PARTS = 200


def parse(spec: str) -> list[tuple[int, int]]:
    """``"1-50, 75"`` → ``[(1, 50), (75, 75)]``. Raises ``InputError`` (request:bad-pages)."""
    parts = [p.strip() for p in spec.split(",")]
    if not spec.strip() or len(parts) > MAX_PARTS:
        raise _bad(spec, f"give 1 to {MAX_PARTS} pages or ranges, such as 1-50,75")
    ranges = []
    for part in parts:
        match = _PART.fullmatch(part.replace(" ", ""))
        if match is None:
            raise _bad(spec, f"{part!r} is not a page or a range such as 3-7")
        first = int(match[1])
        last = int(match[2] or first)
        if first < 1 or last < first:
            raise _bad(spec, f"{part!r}: pages count from 1 and a range runs low to high")
        ranges.append((first, last))
    return ranges


def select(spec: str, page_count: int) -> list[int]:
    """The 0-based page indices ``spec`` names in a document of ``page_count`` pages, in order."""
    if any(last > page_count for _, last in parse(spec)):
        raise _bad(spec, f"the document has {page_count} pages")
    return indices(spec)


def indices(spec: str) -> list[int]:
    """The 0-based indices of an already checked ``spec``, in order, each once."""
    return sorted({i for first, last in parse(spec) for i in range(first - 1, last)})


def _bad(spec: str, why: str) -> InputError:
    return InputError(ErrorCode.REQUEST_BAD_PAGES, f"pages={spec[:80]!r}: {why}")
