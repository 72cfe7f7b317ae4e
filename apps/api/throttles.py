"""Per-tenant rate limits, the daily page quota, and each tenant's share of the backlog: the door's
spending controls.

Counters live in the shared Redis cache (settings ``CACHES``) so every web process sees the same
numbers. Rates are fixed windows counted with Redis INCR: one atomic round trip per request, no
list of timestamps per tenant (DRF's SimpleRateThrottle keeps one and rewrites it every time,
and two processes can both read the same old list). A fixed window admits at most twice the
rate across a window boundary, an acceptable price for an O(1), race-free counter.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Count, Sum
from rest_framework.throttling import BaseThrottle

from apps.api.auth import tenant_of
from apps.api.errors import ApiError
from apps.api.models import Tenant
from apps.jobs.documents import Probe
from apps.jobs.models import Job, Page
from apps.jobs.states import PAGE_WAITS_FOR
from ocrsite.vocabulary import ErrorCode

_PERIODS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
    "d": 86400,
    "day": 86400,
}
_RATE = re.compile(r"\s*(\d+)\s*/\s*([a-z]+)\s*")


def parse_rate(rate: str) -> tuple[int, int] | None:
    """``"100/min"`` → (100, 60); empty → None (unlimited). Raises ValueError on anything else."""
    if not rate or not rate.strip():
        return None
    match = _RATE.fullmatch(rate.lower())
    if not match or match.group(2) not in _PERIODS:
        raise ValueError(f"rate {rate!r} is not N/s, N/min, N/hour or N/day")
    return int(match.group(1)), _PERIODS[match.group(2)]


def now() -> float:
    """The clock every window and quota day is cut from (one seam, so tests can pin the instant)."""
    return time.time()


def _tenant_key(tenant: str) -> str:
    # Tenants come from JWT claims too: hash them into a short, key-safe token.
    return hashlib.sha256(tenant.encode()).hexdigest()[:24]


def _add(key: str, delta: int, ttl: int) -> int:
    """Atomically add ``delta`` to a counter that expires ``ttl`` seconds after its creation."""
    for _ in range(3):
        cache.add(key, 0, timeout=ttl)
        try:
            return cache.incr(key, delta)
        except ValueError:  # expired between add and incr: create it again
            continue
    raise RuntimeError(f"cache counter {key} keeps vanishing")


class TenantRateThrottle(BaseThrottle):
    """N requests per window per tenant; the N+1th is a 429 ``rate:<scope>`` with Retry-After."""

    scope = ""
    setting = ""

    def allow_request(self, request, view) -> bool:
        tenant = tenant_of(request)
        rate = parse_rate(getattr(settings, self.setting))
        if not tenant or rate is None:
            return True
        limit, period = rate
        at = now()
        window = int(at // period)
        count = _add(f"rate:{self.scope}:{_tenant_key(tenant)}:{period}:{window}", 1, period + 1)
        if count > limit:
            wait = max(1, math.ceil((window + 1) * period - at))
            # Raised here rather than returning False so the refusal names its own limit; DRF's
            # generic Throttled cannot say which of several throttles refused.
            raise ApiError(
                ErrorCode(f"rate:{self.scope}"),
                f"more than {limit} {self.scope} per {period} s for this tenant; retry in {wait} s",
                headers={"Retry-After": str(wait)},
            )
        return True


class SubmissionThrottle(TenantRateThrottle):
    scope = "submissions"
    setting = "OCR_RATE_SUBMISSIONS"


class PollThrottle(TenantRateThrottle):
    """Status, list, result and cancel: cheap reads, so a separate, much higher budget."""

    scope = "polls"
    setting = "OCR_RATE_POLLS"


# --- quota and backpressure, checked after the probe (services.submit's ``admit`` hook) ----------


def _quota_key(tenant: str, day: datetime) -> str:
    return f"quota:pages:{_tenant_key(tenant)}:{day:%Y%m%d}"


def pages_used_today(tenant: str) -> int:
    """Pages charged to the tenant since UTC midnight (for operators and tests)."""
    return int(cache.get(_quota_key(tenant, datetime.fromtimestamp(now(), UTC))) or 0)


def charge_pages(tenant: str, pages: int) -> Callable[[], None] | None:
    """Count ``pages`` against the tenant's UTC day; refuse with 429 past OCR_QUOTA_PAGES_PER_DAY.

    Returns the undo that services.submit calls when no job is created after all.
    """
    limit = settings.OCR_QUOTA_PAGES_PER_DAY
    if limit <= 0 or not tenant:
        return None
    today = datetime.fromtimestamp(now(), UTC)
    key = _quota_key(tenant, today)
    total = _add(key, pages, 2 * 86400)
    if total > limit:
        cache.decr(key, pages)
        midnight = datetime.combine(today.date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
        wait = max(1, math.ceil((midnight - today).total_seconds()))
        raise ApiError(
            ErrorCode.QUOTA_PAGES_PER_DAY,
            f"this document has {pages} page(s); {total - pages} of the {limit} pages allowed per day are used",
            headers={"Retry-After": str(wait)},
        )
    return lambda: cache.decr(key, pages)


def waiting_by_tenant() -> dict[str, int]:
    """Pages waiting for layout or recognition, per tenant, from the database (the system of record).

    Queued jobs count with their probed page_count (ingest has not split them yet); running jobs
    count their pages still waiting for layout (queued) or for recognition (detected). Broker
    list lengths would miss the first group and count messages, not pages (one layout message
    carries OCR_LAYOUT_BATCH pages), and could not say whose they are. Text-layer pages of queued
    jobs are counted too: an overestimate that errs towards refusing.
    """
    waiting: dict[str, int] = {}
    # A batch's jobs wait on the bulk lane, bounded by OCR_BATCH_WINDOW: they never close the door.
    queued = (
        Job.objects.filter(status=Job.Status.QUEUED, batch__isnull=True).values("tenant").annotate(n=Sum("page_count"))
    )
    split = (
        Page.objects.filter(status__in=list(PAGE_WAITS_FOR), job__status=Job.Status.RUNNING, job__batch__isnull=True)
        .values("job__tenant")
        .annotate(n=Count("pk"))
    )
    for row in queued:
        waiting[row["tenant"]] = waiting.get(row["tenant"], 0) + (row["n"] or 0)
    for row in split:
        waiting[row["job__tenant"]] = waiting.get(row["job__tenant"], 0) + row["n"]
    return waiting


def waiting_pages() -> int:
    """All tenants' waiting pages (for operators and tests)."""
    return sum(waiting_by_tenant().values())


def check_backpressure(tenant: str, pages: int) -> None:
    """Refuse the tenant that is over its share of the backlog, never the others.

    - A tenant with a ``backlog_share`` (or OCR_BACKLOG_SHARE below 1) may have at most that
      fraction of OCR_BACKPRESSURE_PAGES waiting, busy platform or not.
    - Once more than OCR_BACKPRESSURE_PAGES would wait in all with this document, a tenant is
      refused while its waiting pages plus this document's would pass an equal share of that
      threshold among the tenants with pages waiting (itself included): the tenant that filled
      the queue waits, a tenant with little waiting and a small document is still admitted.

    The refusal speaks of the caller's own pages only, never of the platform's queue.
    """
    threshold = settings.OCR_BACKPRESSURE_PAGES
    if threshold <= 0:
        return
    waiting = waiting_by_tenant()
    mine = waiting.get(tenant, 0)
    share = tenant_backlog_share(tenant)
    if share < 1.0 and mine + pages > (cap := math.floor(share * threshold)):
        _refuse(f"this tenant has {mine} pages waiting for OCR and may have at most {cap}; retry later")
    total = sum(waiting.values())
    # The document being admitted counts: a tenant under its share must not bring a
    # 1,000-page document onto a backlog already over the threshold. A tenant with nothing
    # waiting may still bring one document of any allowed size while the backlog is within the
    # threshold (else a big document would wait for an idle platform); the overshoot is then
    # at most one document per such tenant.
    if total + pages > threshold:
        busy_tenants = len(waiting.keys() | {tenant})
        fits_alone = mine == 0 and total <= threshold
        if mine + pages > threshold / busy_tenants and not fits_alone:
            _refuse(
                f"this tenant has {mine} pages waiting for OCR and this document has {pages}: more than its "
                "share while the platform is busy; retry later"
            )


def tenant_backlog_share(tenant: str) -> float:
    override = Tenant.objects.filter(slug=tenant).values_list("backlog_share", flat=True).first()
    return settings.OCR_BACKLOG_SHARE if override is None else override


def _refuse(message: str) -> None:
    raise ApiError(
        ErrorCode.BUSY_BACKPRESSURE,
        message,
        headers={"Retry-After": str(settings.OCR_BACKPRESSURE_RETRY_AFTER)},
    )


def admission(tenant: str) -> Callable[[Probe], Callable[[], None] | None]:
    """The ``admit`` hook for services.submit: the tenant's share of the backlog, then its quota."""

    def admit(found: Probe) -> Callable[[], None] | None:
        check_backpressure(tenant, found.page_count)
        return charge_pages(tenant, found.page_count)

    return admit
