"""The one backoff: exponential waits with jitter, drawn by tenacity's wait strategies.

Attempt n's step is d = min(cap, base × 2^(n-1)) seconds and its wait is drawn uniformly from
[low × d, high × d]. Full jitter (low 0, high 1: the page and job stages, the vLLM client)
spreads a burst of failures so it does not come back as a burst; a narrow band (webhooks:
0.9-1.1) keeps each wait close to its step, so a receiver's log shows the schedule it was promised.

Used through ``Backoff(...)(attempt)`` where the caller schedules the retry itself (a Celery
countdown, an asyncio sleep), or ``Backoff(...).wait`` as a tenacity ``wait=``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tenacity import RetryCallState, wait_exponential, wait_random_exponential
from tenacity.wait import wait_base


@dataclass(frozen=True)
class Backoff:
    base_s: float
    cap_s: float
    low: float = 0.0
    high: float = 1.0

    @property
    def wait(self) -> wait_base:
        # A fixed share of the step plus a full-jitter draw over the rest: [low × d, high × d].
        spread = self.high - self.low
        return wait_exponential(multiplier=self.low * self.base_s, max=self.low * self.cap_s) + wait_random_exponential(
            multiplier=spread * self.base_s, max=spread * self.cap_s
        )

    def __call__(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1 for the first)."""
        state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})
        state.attempt_number = max(1, attempt)
        return self.wait(state)
