"""Test scaffolding for real workers: a permanent engine failure on chosen pages.

Every test worker imports this module (``tests/conftest.py`` starts ``celery worker --include
tests.support.faults``); it does nothing unless the worker's environment sets OCR_FAIL_PAGES. With it
(1-based page numbers, comma-separated), recognising one of those pages fails permanently with
``engine:injected-fault``, exactly where a real engine's permanent failure would surface, so the
console's retry and the failure metrics can be exercised on a real worker. The production
recognition path knows nothing of it.
"""

from __future__ import annotations

import os

from apps.jobs.models import Page
from ocrsite.vocabulary import ErrorCode
from workers import recognition
from workers.engines.base import EngineError

FAIL_PAGES = frozenset(p.strip() for p in os.environ.get("OCR_FAIL_PAGES", "").split(",") if p.strip())


def _failing(read):
    def read_or_fail(pages: list[Page]):
        for page in pages:
            if str(page.index + 1) in FAIL_PAGES:
                raise EngineError(
                    ErrorCode.ENGINE_INJECTED_FAULT,
                    f"page {page.index + 1} is listed in OCR_FAIL_PAGES",
                    permanent=True,
                )
        return read(pages)

    return read_or_fail


if FAIL_PAGES:
    recognition._read = _failing(recognition._read)
