"""The steps every page stage (layout, recognition) takes around its engine, in one place.

A stage claims its pages by compare-and-set (each claim counts an attempt on the page row), reads
them with its engine, and the stage's own module writes what a success produced. When the engine
raises instead:

- the job was cancelled (a recogniser aborted its requests in flight): nothing is kept, the
  timeline notes the cancel;
- the worker is shutting down (``worker:draining``, ``workers.drain``): the claims are handed
  back with their attempts refunded and the pages sent again at once, for another worker;
- a transient failure with attempts left (``workers.retry``): the claims are handed back, the
  timeline notes a retry, and the pages are sent again after the backoff once this commits;
- otherwise the pages fail with the engine's code (``services.finish_page``, which ends the job
  and, when it was the job's last page, sends assembly).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from django.db import transaction
from django.utils import timezone

from apps.jobs import services
from apps.jobs.models import Page
from apps.jobs.states import PageMove
from ocrsite import logcontext
from ocrsite.vocabulary import ErrorCode
from workers import costs
from workers.engines.base import EngineError
from workers.retry import policy

log = logging.getLogger(__name__)

Read = TypeVar("Read")


@dataclass(frozen=True)
class PageStage:
    name: str  # the timeline's stage name
    claim: PageMove
    failed: PageMove
    # Sends pages to this stage's queue again: enqueue.detect_layout / enqueue.recognize.
    send: Callable[..., None]
    # Layout passes carry many pages (logged as lists); recognition one.
    batched: bool = False

    def run(
        self,
        page_ids: Iterable[int],
        read: Callable[[list[Page]], Read],
        write: Callable[[list[Page], Read, datetime, int], None],
    ) -> None:
        """Claim the pages, ``read(pages)`` with the engine, then ``write(pages, what_was_read,
        started, elapsed_ms)``. Only an ``EngineError`` from ``read`` is handled here: ``write``
        runs after the engine is done, and its failures are the task's (``PipelineTask``)."""
        claimed = services.claim_pages(page_ids, self.claim)
        if not claimed:
            return  # another worker got there first, or the job is no longer running
        pages = list(Page.objects.filter(pk__in=claimed).select_related("job").order_by("pk"))
        if self.batched:
            logcontext.bind(job_id=sorted({str(p.job_id) for p in pages}), page_id=claimed)
        else:
            logcontext.bind(job_id=pages[0].job_id, page_id=pages[0].pk)
        started = timezone.now()
        t0 = time.perf_counter()
        with costs.page_step(self.name, pages):
            try:
                found = read(pages)
            except EngineError as exc:
                self._engine_failed(pages, exc, started)
                return
            write(pages, found, started, int((time.perf_counter() - t0) * 1000))

    def fail(self, page: Page, exc: EngineError, started: datetime) -> None:
        """This page fails with the engine's code; the rest of its batch goes on."""
        self._record(page, started, outcome="failed", error_code=exc.code)
        services.finish_page(page.pk, self.failed, error=(exc.code, exc.message))

    def done(self, page: Page, started: datetime, detail: dict) -> None:
        """The timeline's entry for a page this stage finished with."""
        services.record(page.job_id, self.name, page_id=page.pk, started=started, attempt=page.attempts, detail=detail)

    def _engine_failed(self, pages: list[Page], exc: EngineError, started: datetime) -> None:
        if exc.code == ErrorCode.JOB_CANCELLED:
            for page in pages:
                self._record(page, started, outcome="cancelled", error_code=exc.code)
            return
        if exc.code == ErrorCode.WORKER_DRAINING:
            again = services.release_pages([p.pk for p in pages], self.claim.to, refund=True)
            for page in pages:
                self._record(page, started, outcome="handed-back", error_code=exc.code)
            log.info("%s of %d page(s) handed back: the worker is stopping", self.name, len(pages))
            transaction.on_commit(lambda: self.send(again))
            return
        rules = policy()
        attempts = max(p.attempts for p in pages)
        if rules.should_retry(exc, attempts):
            log.warning("%s of %d page(s) failed (%s); sending them again", self.name, len(pages), exc)
            again = services.release_pages([p.pk for p in pages], self.claim.to)
            for page in pages:
                self._record(page, started, outcome="retry", error_code=exc.code)
            delay = rules.backoff_s(attempts)
            transaction.on_commit(lambda: self.send(again, countdown=delay))
            return
        for page in pages:
            self.fail(page, exc, started)

    def _record(self, page: Page, started: datetime, *, outcome: str, error_code: str) -> None:
        services.record(
            page.job_id, self.name, page_id=page.pk, started=started, outcome=outcome, error_code=error_code
        )
