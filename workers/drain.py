"""A worker asked to stop hands its pages back instead of sitting on them.

Kubernetes stops a pod (a KEDA scale-in, a rollout, a node drain) with SIGTERM to the container's
first process, Celery's MainProcess, which begins its warm shutdown: it consumes nothing more and
waits for the tasks in hand. ``requested()`` turns true at that moment (Celery's
``worker_shutting_down`` signal, sent from the MainProcess's handler). Work that would only wait
then stops waiting: the vLLM recognizer drops its backoffs and its wait for a shared slot, and
the page stage releases the claim, refunds the attempt and sends the page to its queue at once
(``workers.stage``), where another worker takes it. Work actually being done finishes (a CPU page
takes seconds, a request already at vLLM at most VLLM_TIMEOUT_S), within the pod's
terminationGracePeriodSeconds (tests/test_k8s.py checks each tier's grace against what its tasks
may take).

Why not Celery's own soft shutdown (``worker_soft_shutdown_timeout`` with ``REMAP_SIGTERM=SIGQUIT``),
read in celery 5.6's ``apps/worker.py`` and ``worker/worker.py``: it sleeps the whole timeout
whenever a task was running when the signal came, however soon the task ends; its cold shutdown
then cancels running tasks through ``pool.terminate_job``, which the thread pool (our ocr tier)
does not implement; and on prefork the killed task's message is restored to Redis while the page
row stays claimed, so the redelivery finds the claim taken and the page waits for the sweep.
Handing back through the claim is what makes the redelivery useful.

The flag is per process. The thread pool runs tasks in the MainProcess, so its tasks see it at
once; prefork children do not receive the signal and finish what they hold (the cpu and layout
tiers: seconds per task on their engines).
"""

from __future__ import annotations

import threading

from celery.signals import worker_shutting_down

_stopping = threading.Event()


def requested() -> bool:
    return _stopping.is_set()


def begin() -> None:
    _stopping.set()


@worker_shutting_down.connect
def _on_shutdown(sig=None, how=None, **_) -> None:
    # Runs inside the signal handler: set the flag and nothing else (no logging, whose locks
    # another thread may hold).
    begin()
