"""The service layer: everything that changes a job, a page or their stored bytes goes through here.

By concern, one module each:

- ``creation``: ``create_job``, the one path from a probed document to a queued job, whatever
  way it came (``idempotency``: a retried submission gets its first job back);
- ``result_cache``: a job whose document, pages, options and engine versions were read before is
  answered with that result (a row naming it, no page work); done jobs offer theirs;
- ``intake``: ``submit`` probes a document sent with the request and makes its job (direct
  uploads to storage are ``apps.jobs.direct_uploads``);
- ``transitions``: the pipeline's status moves, each a compare-and-set (claims, releases, a page's
  finish that counts it on the job and, for its last page, sends assembly), the attempts counted
  on rows (a page's by its claims, a job-wide stage's by ``claim_attempt``), and the signals sent
  when a page or a job ends;
- ``actions``: what an operator does to a job (cancel, retry, rerun, purge);
- ``retention``: the scheduled purge of finished jobs past retention;
- ``timeline``: one row per stage attempt or action (``record``);
- ``storage``: payload bytes in the default storage.

What runs next is the caller's choice: the stage modules in ``workers`` enqueue the next stage;
operator actions enqueue by task name. Callers use the names below (``services.submit``,
``services.finish_page``...): this is the layer's public surface, the modules its filing.
"""

from __future__ import annotations

from apps.jobs.services.actions import cancel, purge, rerun, reset_pages, retry
from apps.jobs.services.creation import (
    Admit,
    JobRequest,
    Source,
    create_job,
    select_pages,
    send_ingest,
    start_or_finish,
)
from apps.jobs.services.idempotency import IdempotencyConflict, idempotent_job
from apps.jobs.services.intake import Limits, Upload, clean_filename, default_limits, submit
from apps.jobs.services.result_cache import register as register_result
from apps.jobs.services.retention import RETENTION_ACTOR, Purged, purge_expired
from apps.jobs.services.storage import save_bytes
from apps.jobs.services.timeline import WORKER, record
from apps.jobs.services.transitions import (
    PageFinished,
    claim_attempt,
    claim_pages,
    fail_job,
    finish_job,
    finish_page,
    flag_job,
    job_finished,
    move_page,
    page_finished,
    release_pages,
    start_job,
    within_attempts,
)

__all__ = [
    "RETENTION_ACTOR",
    "WORKER",
    "Admit",
    "IdempotencyConflict",
    "JobRequest",
    "Limits",
    "PageFinished",
    "Purged",
    "Source",
    "Upload",
    "cancel",
    "claim_attempt",
    "claim_pages",
    "clean_filename",
    "create_job",
    "default_limits",
    "fail_job",
    "finish_job",
    "finish_page",
    "flag_job",
    "idempotent_job",
    "job_finished",
    "move_page",
    "page_finished",
    "purge",
    "purge_expired",
    "record",
    "release_pages",
    "select_pages",
    "send_ingest",
    "rerun",
    "reset_pages",
    "retry",
    "register_result",
    "save_bytes",
    "start_job",
    "start_or_finish",
    "submit",
    "within_attempts",
]
