"""The state machine and the retry policy, as declared: consistent with the routes, and the
backoff the policy documents is the backoff it gives."""

from __future__ import annotations

import pytest

from apps.jobs import services, states
from apps.jobs.states import PageStatus
from ocrsite.backoff import backoff_s
from ocrsite.vocabulary import ROUTES, Queue, TaskName
from workers.engines.base import EngineError
from workers.retry import RetryPolicy


def test_each_waiting_status_waits_for_the_queue_of_the_task_that_claims_it():
    claimed_by = {
        states.CLAIM_FOR_LAYOUT.frm: TaskName.DETECT_LAYOUT,
        states.CLAIM_FOR_RECOGNITION.frm: TaskName.RECOGNIZE,
    }
    assert set(states.PAGE_WAITS_FOR) == set(claimed_by)
    for status, queue in states.PAGE_WAITS_FOR.items():
        assert ROUTES[claimed_by[status]] == queue
    assert states.JOB_WAITS_FOR[states.JobStatus.QUEUED] == ROUTES[TaskName.INGEST]
    assert states.JOB_WAITS_FOR[states.JobStatus.ASSEMBLING] == ROUTES[TaskName.ASSEMBLE] == Queue.CPU


def test_a_release_undoes_exactly_its_claim_and_every_status_is_reachable():
    for claim in (states.CLAIM_FOR_LAYOUT, states.CLAIM_FOR_RECOGNITION):
        release = states.RELEASE[claim.to]
        assert (release.frm, release.to) == (claim.to, claim.frm)
    moves = [v for v in vars(states).values() if isinstance(v, states.PageMove)] + list(states.RELEASE.values())
    reached = {PageStatus.QUEUED} | {m.to for m in moves}
    assert reached == set(PageStatus)
    # Terminal statuses are never left.
    assert not [m for m in moves if m.frm in states.PAGE_TERMINAL]


def test_finish_page_refuses_a_move_that_does_not_end_the_page():
    with pytest.raises(ValueError):
        services.finish_page(1, states.LAYOUT_DONE)
    with pytest.raises(ValueError):  # a failure needs an error, a success must not have one
        services.finish_page(1, states.RECOGNITION_FAILED)


def test_backoff_is_exponential_with_full_jitter_under_its_cap():
    policy = RetryPolicy(max_attempts=5, base_s=2.0, cap_s=20.0)
    for attempt, ceiling in ((1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0), (5, 20.0), (9, 20.0)):
        draws = [policy.backoff_s(attempt) for _ in range(400)]
        assert min(draws) >= 0 and max(draws) <= ceiling
        # Full jitter spreads over the whole window, not a fixed delay.
        assert max(draws) > 0.7 * ceiling and min(draws) < 0.3 * ceiling


def test_the_webhook_backoff_is_the_same_backoff_in_a_band_around_its_step():
    for attempt, step in ((1, 0.3), (2, 0.6), (3, 1.2), (9, 10.0)):
        draws = [backoff_s(attempt, 0.3, 10.0, low=0.9, high=1.1) for _ in range(400)]
        assert 0.9 * step - 1e-9 <= min(draws) and max(draws) <= 1.1 * step + 1e-9
        assert max(draws) - min(draws) > 0.1 * step, "it jitters within the band"


def test_only_transient_failures_with_attempts_left_are_retried():
    policy = RetryPolicy(max_attempts=3)
    transient = EngineError("vllm:timeout", "slow")
    permanent = EngineError("input:corrupt", "bad", permanent=True)
    assert policy.should_retry(transient, 1) and policy.should_retry(transient, 2)
    assert not policy.should_retry(transient, 3)
    assert not policy.should_retry(permanent, 1)
    assert policy.should_retry(ConnectionError("broker"), 1)
    assert not policy.should_retry(ValueError("a bug"), 1)
