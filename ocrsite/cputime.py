"""This process's CPU time, as the stages charge it to jobs and pages.

Here rather than in ``workers.costs`` because a batch's expansion (apps) charges its items too,
and apps never import workers."""

from __future__ import annotations

import resource


def cpu_seconds(*, children: bool = False) -> float:
    """User + system CPU-seconds of this process (every thread); with ``children``, plus those
    of the child processes it has waited for (a budgeted page reader, a probe in a child)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    total = own.ru_utime + own.ru_stime
    if children:
        waited = resource.getrusage(resource.RUSAGE_CHILDREN)
        total += waited.ru_utime + waited.ru_stime
    return total
