"""The one backoff: exponential waits with jitter.

Attempt n's step is d = min(cap, base × 2^(n-1)) seconds and its wait is drawn uniformly from
[low × d, high × d]. Full jitter (low 0, high 1: the page and job stages, the vLLM client)
spreads a burst of failures so it does not come back as a burst; a narrow band (webhooks:
0.9-1.1) keeps each wait close to its step, so a receiver's log shows the schedule it was promised.

Every caller schedules the retry itself (a Celery countdown, an asyncio sleep) with the seconds
``backoff_s`` returns.
"""

from __future__ import annotations

import random

# Past 2^60 doublings any base is beyond any cap; bounding the exponent keeps the product a finite
# float for whatever attempt number a caller passes.
_MAX_DOUBLINGS = 60


def backoff_s(attempt: int, base_s: float, cap_s: float, *, low: float = 0.0, high: float = 1.0) -> float:
    """Seconds to wait after failed attempt ``attempt`` (1 for the first)."""
    step = min(cap_s, base_s * 2 ** min(max(1, attempt) - 1, _MAX_DOUBLINGS))
    return random.uniform(low * step, high * step)
