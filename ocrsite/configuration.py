"""The configuration reference (docs/configuration.md), made from the settings module itself.

Every variable is found where ``ocrsite/settings.py`` reads it through an ``ocrsite.env`` helper,
so the page cannot list one that is not read or miss one that is: the name, its type (the helper),
its default and its choices come from the call; the one-line help comes from ``HELP`` below, and
``tests/unit/test_configuration.py`` fails when a variable has none or the page is stale.

    python -m ocrsite.configuration > docs/configuration.md      (make docs)
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from ocrsite import catalogue, vocabulary

SETTINGS = Path(__file__).resolve().parent / "settings.py"
KINDS = {
    "env_str": "text",
    "env_secret": "secret",
    "env_int": "integer",
    "env_float": "number",
    "env_bool": "boolean",
    "env_list": "list",
    "env_choice": "choice",
}

HELP = {
    "OCR_VAR_DIR": "SQLite file, local media, static files and derived models",
    "DJANGO_DEBUG": "Django debug mode",
    "DJANGO_SECRET_KEY": "set in production; the default is refused with DJANGO_SECURE",
    "DJANGO_ALLOWED_HOSTS": "comma-separated host names the web app answers",
    "POD_IP": "the pod's own IP (Kubernetes downward API), allowed as a host so kubelet probes are not refused",
    "DATABASE_URL": "the database (PostgreSQL in production and tests)",
    "DATABASE_CONN_MAX_AGE": "seconds a database connection is reused",
    "DATABASE_CONN_HEALTH_CHECKS": "check a reused connection at its first use and replace it if the server dropped it",
    "OCR_MEDIA_ROOT": "local storage folder",
    "OCR_STORAGE": "where uploads, page images and results live",
    "AWS_STORAGE_BUCKET_NAME": "S3 bucket",
    "AWS_S3_ENDPOINT_URL": "S3-compatible endpoint (MinIO, Ceph, ...)",
    "AWS_S3_REGION_NAME": "S3 region",
    "AWS_ACCESS_KEY_ID": "S3 credentials (empty: the instance role)",
    "AWS_SECRET_ACCESS_KEY": "S3 credentials (empty: the instance role)",
    "AWS_LOCATION": "key prefix inside the bucket",
    "AZURE_ACCOUNT_NAME": "Azure Blob account",
    "AZURE_ACCOUNT_KEY": "Azure Blob credentials",
    "AZURE_CONNECTION_STRING": "Azure Blob credentials, as one connection string",
    "AZURE_CONTAINER": "Azure Blob container",
    "OCR_MAX_UPLOAD_BYTES": "multipart upload limit through the web tier (413 input:too-large past it)",
    "OCR_MAX_DOCUMENT_BYTES": "a tenant's default document size for direct uploads (Tenant.max_upload_bytes overrides)",
    "OCR_MAX_PAGES": "page limit (422 past it; Tenant.max_pages overrides)",
    "OCR_UPLOAD_URL_SECONDS": "lifetime of a direct upload's presigned URL",
    "OCR_UPLOAD_KEEP_UNUSED_SECONDS": "how long after its URL expired an unused upload's object is kept (s)",
    "OCR_MAX_IMAGE_PIXELS": "pixel cap for images and rendered pages",
    "OCR_IMAGE_PIXELS_PER_BYTE": "an image document decodes (all frames, animations at canvas size) to at most this many pixels per byte of file, past OCR_MAX_IMAGE_PIXELS; else refused input:too-large",
    "OCR_ENGINE": "the engine a job gets when it names none",
    "OCR_LAYOUT_ENGINE": "this deployment's layout engine: rapid-layout (cpu) or PP-DocLayoutV3 (paddle)",
    "OCR_RECOGNIZER": "this deployment's recognizer: rapidocr (cpu) or a VLM on vLLM (vllm)",
    "OCR_DPI": "render resolution for OCR pages",
    "OCR_LAYOUT_BATCH": "pages per layout forward pass",
    "OCR_BATCH_WINDOW_MS": "how long the layout collector waits to fill a batch",
    "OCR_WORKER_MAX_MEMORY_MB": "a worker pool process whose peak RSS passes this is replaced after its task (0: no guard)",
    "OCR_ENGINE_THREADS": "intra-op threads per engine (0: the process's CPU budget shared by the pool's processes)",
    "OCR_REC_BATCH": "text-line crops per recognition batch (0: the CPU profile's)",
    "OCR_DET_MAX_SIDE": "a page is scaled to fit this longest side before OCR",
    "OCR_DET_LIMIT_SIDE": "text detection input size in pixels (see OCR_DET_LIMIT_TYPE)",
    "OCR_DET_LIMIT_TYPE": "min: the short side grown to OCR_DET_LIMIT_SIDE; max: the long side capped at it",
    "OCR_CPU_PROFILE": "fast: a Latin-cut tiny recogniser, cheaper detection, CJK pages found by reading and read by the full-head model; accurate: the small models, Latin head first and the full head for pages in other scripts",
    "OCR_CPU_PROBE_MODEL": "PP-OCRv6 model of the 960-px detection probe, small or tiny (empty: the profile's; fast: tiny)",
    "OCR_CPU_REC_MODEL": "PP-OCRv6 recognition model, small or tiny (empty: the profile's; fast: tiny)",
    "OCR_CPU_REREAD_BELOW": "lines read under this confidence are read again by the small model, the surer reading kept (-1: the profile's, fast 0.95; 0: never)",
    "OCR_CPU_RUNTIME": "what runs recognition (empty: the profile's; auto: OpenVINO with AVX-512, else onnxruntime)",
    "OCR_OTHER_SCRIPTS": "read pages in Cyrillic, Hangul, Arabic, Hebrew, Devanagari and Vietnamese with Tesseract's models for them where installed (make script-models); false: flag them script:unsupported / language:unsupported",
    "OCR_TESSDATA_DIR": "the folder of Tesseract's models (empty: TESSDATA_PREFIX, then /usr/share/tesseract-ocr/5/tessdata and the like)",
    "OCR_MODEL_CACHE_DIR": "where derived models (the fast profile's Latin head) are written once",
    "OCR_CLI_MMAP_THRESHOLD": "bytes from which manage.py ocr has glibc map allocations on their own (0: glibc's own threshold; a fixed one lowers peak memory for CPU)",
    "OCR_TEXT_LAYER_MIN_CHARS": "characters a PDF page needs to skip OCR",
    "OCR_LOW_CONFIDENCE": "an OCR page whose confidence (character-weighted mean of its regions') is under this is flagged ocr:low-confidence",
    "OCR_PADDLE_MODEL_DIR": "PaddleOCR layout weights (shared volume); required for paddle layout and gpu jobs",
    "OCR_PADDLE_MODEL": "PaddleOCR layout model",
    "OCR_PADDLE_BATCH": "PaddleOCR predict batch size",
    "OCR_PADDLE_DEVICE": "Paddle device for layout (gpu:N or cpu)",
    "OCR_PADDLE_THRESHOLD": "layout score threshold",
    "VLLM_BASE_URL": "vLLM's OpenAI-compatible endpoint, e.g. http://vllm:8000/v1; required for the vllm recognizer",
    "VLLM_API_KEY": "bearer key for vLLM",
    "VLLM_PROFILE": "region model profile (workers/engines/profiles.py)",
    "VLLM_MODEL": "served model name when it differs from the profile's",
    "VLLM_PAGE_PROFILE": "one-stage page profile for vlm-page jobs",
    "VLLM_PAGE_BASE_URL": "endpoint of the page model's vLLM (empty: VLLM_BASE_URL)",
    "VLLM_PAGE_MODEL": "served name of the page model (empty: the profile's)",
    "VLLM_MAX_IN_FLIGHT": "requests in flight per ocr worker process; keep near vLLM's max-num-seqs",
    "VLLM_TIMEOUT_S": "total deadline per request attempt",
    "VLLM_RETRIES": "retries per region on timeouts, dropped connections and 5xx other than 503 (overload is not counted)",
    "OCR_WEBHOOK_SCHEMES": "URL schemes a callback_url may use (comma-separated; empty: http and https); others are refused at the door, webhook:undeliverable",
    "OCR_WEBHOOK_PORTS": "ports a callback_url may use (comma-separated; empty: any); the cluster's egress NetworkPolicy allows 443 only",
    "DJANGO_PROXY_HEADERS": "what the trusted proxy sends: x-forwarded (X-Forwarded-Proto/-For) or forwarded (RFC 7239, as API Gateway HTTP APIs do); the other form is ignored",
    "VLLM_OVERLOAD_DEADLINE_S": "how long a page waits out 429, 503, connection refused or a full shared cap before failing vllm:overloaded; spends no attempt",
    "VLLM_GLOBAL_MAX_IN_FLIGHT": "requests in flight to one vLLM endpoint from all workers together, counted in Redis (the broker); 0: no shared cap",
    "VLLM_BACKOFF_S": "first retry backoff (doubles, capped)",
    "VLLM_MAX_TOKENS": "max_tokens per request (0: the profile's ceiling; never above it)",
    "VLLM_CANCEL_POLL_S": "how often in-flight requests check whether their job was cancelled",
    "OCR_VLLM_LABELS": "only these region labels go to the VLM, the rest to the CPU recognizer (empty: all)",
    "OCR_TASK_SOFT_LIMIT": "task soft time limit (s)",
    "OCR_TASK_HARD_LIMIT": "task hard time limit (s); the broker's visibility timeout is set above it",
    "OCR_STALE_AFTER": "seconds after which the sweep re-sends a claim or message",
    "OCR_SWEEP_EVERY": "beat period of the sweep (s)",
    "OCR_MAX_ATTEMPTS": "attempts a page or a job stage gets on transient errors",
    "OCR_RETRY_BACKOFF_S": "retry backoff base (s): attempt n waits up to min(max, base x 2^(n-1)), full jitter",
    "OCR_RETRY_BACKOFF_MAX_S": "retry backoff ceiling (s)",
    "OCR_RETENTION_DAYS": "finished jobs older than this lose source, images, results and region text (0: keep)",
    "OCR_PURGE_EVERY": "beat period of the retention purge and of the upload sweep (s)",
    "OCR_PURGE_BATCH": "jobs purged, and upload objects deleted, per run at most",
    "CELERY_BROKER_URL": "Redis broker",
    "CELERY_WORKER_PREFETCH_MULTIPLIER": "messages a worker process reserves ahead",
    "CELERY_DB_REUSE_MAX": "tasks a worker process runs before its database connections are closed anyway (0: after every task)",
    "OCR_WEBHOOK_MAX_ATTEMPTS": "webhook delivery attempts in all",
    "OCR_WEBHOOK_BACKOFF_S": "webhook retry backoff base (s)",
    "OCR_WEBHOOK_BACKOFF_MAX_S": "webhook retry backoff ceiling (s)",
    "OCR_WEBHOOK_TIMEOUT_S": "webhook delivery deadline (s): connect, send and answer in all",
    "OCR_WEBHOOK_MAX_RESPONSE_BYTES": "how much of a receiver's answer is read",
    "OCR_WEBHOOK_ALLOW_NETS": "CIDRs a callback may reach although not public (empty: public addresses only)",
    "OCR_WEBHOOK_ROTATION_OVERLAP_H": "hours an old webhook secret keeps signing beside the new one",
    "OCR_PUBLIC_URL": "the API's public origin, for links in webhook events",
    "OCR_API_PAGE_SIZE": "list page size",
    "CACHE_URL": "Redis for Django's cache: throttle windows, page quotas, login lockouts (empty: the broker's)",
    "OCR_RATE_SUBMISSIONS": "per-tenant submissions, N/s|min|hour|day (empty: unlimited) -> 429 rate:submissions",
    "OCR_RATE_POLLS": "per-tenant status, list, result and cancel requests -> 429 rate:polls",
    "OCR_QUOTA_PAGES_PER_DAY": "pages a tenant may submit per UTC day (0: unlimited) -> 429 quota:pages-per-day",
    "OCR_BACKPRESSURE_PAGES": "while more pages than this wait, 503 busy:backpressure for a tenant holding an equal share or more (0: off)",
    "OCR_BACKLOG_SHARE": "fraction of OCR_BACKPRESSURE_PAGES one tenant may have waiting even when idle (a tenant's backlog_share overrides)",
    "OCR_PAGE_CPU_SECONDS": "CPU seconds reading one PDF page in ingest may take -> input:too-complex",
    "OCR_PAGE_MEMORY_MB": "memory (MB, on top of the worker's) reading one PDF page may take -> input:too-complex",
    "OCR_PAGE_MAX_CHARS": "characters of text one page may yield -> input:too-complex",
    "OCR_PAGE_WALL_SECONDS": "wall-clock backstop for reading one PDF page -> input:too-complex",
    "OCR_INGEST_SOFT_LIMIT": "ingest's soft time limit (s); past it the job fails input:too-complex",
    "OCR_INGEST_HARD_LIMIT": "ingest's hard time limit (s)",
    "OCR_ASSEMBLY_SOFT_LIMIT": "assembly's soft time limit (s)",
    "OCR_ASSEMBLY_HARD_LIMIT": "assembly's hard time limit (s)",
    "OCR_PASSWORD_MIN_LENGTH": "minimum password length (Django's password validators)",
    "OCR_BACKPRESSURE_RETRY_AFTER": "Retry-After seconds on a backpressure 503",
    "OCR_IDEMPOTENCY_HOURS": "how long an Idempotency-Key names its job for the tenant",
    "OCR_RESULT_CACHE": "answer a document already read (same bytes, pages, options, engine and model versions) "
    "with its stored result, no page work",
    "OCR_RESULT_CACHE_SHARED": "let the result cache answer one tenant with another tenant's result "
    "(off: each tenant's results serve only that tenant)",
    "OCR_BATCH_EXPAND_CHUNK": "a batch's items made into jobs per expansion step",
    "OCR_BATCH_WINDOW": "a batch's unfinished jobs at most; its next items wait until fewer remain",
    "OCR_BATCH_POLL_SECONDS": "how often a running batch's expansion looks again (new items, the end)",
    "OCR_BATCH_MAX_ITEMS": "most keys or upload ids one batch's list may name (a prefix has no limit)",
    "OCR_RESULT_CACHE_VERSION": "a label in every cache key: change it to stop reusing earlier results "
    "(a model replaced under the same served name)",
    "OIDC_ISSUER": "issuer URL; bearer JWTs must carry exactly this iss (empty: OIDC off)",
    "OIDC_AUDIENCE": "required aud of bearer JWTs",
    "OIDC_JWKS_URL": "where the issuer's signing keys are fetched (empty: issuer + /.well-known/jwks.json)",
    "OIDC_JWKS_FILE": "a JWKS file (mounted secret) used instead of the URL; re-read when it changes",
    "OIDC_JWKS_CACHE_SECONDS": "how long fetched keys are cached (an unknown kid refetches)",
    "OIDC_JWKS_TIMEOUT_SECONDS": "JWKS fetch timeout; a failed fetch answers 503 auth:jwks-unavailable",
    "OIDC_TENANT_CLAIM": "the JWT claim that names the tenant",
    "OIDC_LEEWAY_SECONDS": "clock skew allowed on exp, nbf and iat",
    "OIDC_ALGORITHMS": "accepted JWT algorithms; public-key ones only",
    "DJANGO_TRUSTED_PROXY_COUNT": "TLS-terminating proxies in front (trusts X-Forwarded-Proto and -For when >= 1)",
    "DJANGO_SECURE": "production transport: HTTPS redirect, secure cookies, HSTS",
    "DJANGO_SECURE_SSL_REDIRECT": "with DJANGO_SECURE: redirect plain HTTP to HTTPS",
    "DJANGO_HSTS_SECONDS": "with DJANGO_SECURE: Strict-Transport-Security max-age",
    "DJANGO_HSTS_INCLUDE_SUBDOMAINS": "with DJANGO_SECURE: HSTS includeSubDomains",
    "DJANGO_HSTS_PRELOAD": "with DJANGO_SECURE: HSTS preload",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "origins allowed for session (admin) POSTs across origins",
    "CORS_ALLOWED_ORIGINS": "browser origins allowed to call the API (empty: CORS closed)",
    "AXES_FAILURE_LIMIT": "failed admin logins per username and address before a lockout",
    "AXES_COOLOFF_MINUTES": "admin login lockout length",
    "LOG_FORMAT": "plain lines or one JSON object per line; both carry job_id and page_id",
    "LOG_LEVEL": "root log level",
    "METRICS_TOKEN": "bearer token /metrics requires (empty: loopback clients only)",
    "METRICS_CACHE_SECONDS": "how long a web process reuses its scrape-time measurements",
    "FLOWER_URL": "where the admin links to Flower",
    "OCR_CONSOLE_COUNT_CAP": "the job list counts exactly up to this many matches, then shows an estimate",
}

# Read by something other than the settings module: (where, help).
ELSEWHERE = {
    "FLOWER_BASIC_AUTH": ("compose/Procfile", "user:password[,...] Flower asks for; Flower does not start without it"),
    "FLOWER_PORT": ("compose/Procfile", "Flower's port in the local stack (default 5555)"),
    "OCR_CHROMIUM": ("tests/test_console_browser.py", "test-only: the Chromium the browser test drives"),
    "OCR_FAIL_PAGES": ("tests/support/faults.py", "test-only: 1-based page numbers a test worker fails in recognition"),
    "OTEL_EXPORTER_OTLP_ENDPOINT": (
        "ocrsite/telemetry.py",
        "OTLP/HTTP endpoint for traces (one per job); empty: tracing off, nothing exported. The SDK reads "
        "every other OTEL_* variable itself (OTEL_SERVICE_NAME, OTEL_EXPORTER_OTLP_HEADERS, OTEL_SDK_DISABLED...)",
    ),
    "BULK_CONCURRENCY": ("compose/Procfile", "pool processes of the bulk lane's worker (default 2)"),
}


@dataclass(frozen=True)
class Variable:
    name: str
    kind: str
    default: str
    choices: str


# What a default or a list of choices may be spelled with: the vocabulary's names, the engine
# catalogue and arithmetic.
# Anything else (another setting, a path under the checkout) is shown as the code that computes it.
_NAMES = {
    "__builtins__": {"tuple": tuple},
    "catalogue": catalogue,
    **{k: v for k, v in vars(vocabulary).items() if not k.startswith("_")},
}


def _shown(node: ast.expr | None) -> str:
    if node is None:
        return ""
    try:
        value = eval(compile(ast.Expression(node), str(SETTINGS), "eval"), dict(_NAMES))  # our own source
    except (NameError, AttributeError, TypeError):
        return ast.unparse(node)
    if isinstance(value, list | tuple):
        return ",".join(str(getattr(v, "value", v)) for v in value)
    return str(getattr(value, "value", value))


def variables(source: str | None = None) -> list[Variable]:
    """Every variable the settings module reads through an env helper, in the order it reads them."""
    tree = ast.parse(source if source is not None else SETTINGS.read_text())
    found: dict[str, Variable] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in KINDS:
            name = ast.literal_eval(node.args[0])
            default = node.args[1] if len(node.args) > 1 else None
            choices = node.args[2] if len(node.args) > 2 else None
            found.setdefault(name, Variable(name, KINDS[node.func.id], _shown(default), _shown(choices)))
    return sorted(found.values(), key=lambda v: _line_of(tree, v.name))


def _line_of(tree: ast.Module, name: str) -> int:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value == name:
            return node.lineno
    return 0


def _cell(text: str) -> str:
    return f"`{text}`" if text else "(empty)"


def render() -> str:
    rows = []
    for v in variables():
        kind = v.kind if not v.choices else f"one of `{v.choices}`"
        secret = f" (or `{v.name}_FILE`)" if v.kind == "secret" else ""
        rows.append(f"| `{v.name}` | {kind}{secret} | {_cell(v.default)} | {HELP.get(v.name, '')} |")
    elsewhere = [f"| `{name}` | {where} | {text} |" for name, (where, text) in ELSEWHERE.items()]
    return "\n".join(
        [
            "# Configuration reference",
            "",
            "Generated from `ocrsite/settings.py` by `make docs` (`python -m ocrsite.configuration`); do not",
            "edit by hand. Every value comes from the environment; a `secret` can instead be read from the",
            "file its `_FILE` variable names (Kubernetes and Docker secrets), and an unreadable one is an",
            "error. A default written as code is computed from another setting.",
            "",
            "| variable | type | default | meaning |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
            "## Read elsewhere",
            "",
            "| variable | read by | meaning |",
            "| --- | --- | --- |",
            *elsewhere,
            "",
        ]
    )


if __name__ == "__main__":
    print(render(), end="")
