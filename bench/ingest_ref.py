"""The ingest benchmark's reference: the product's ingest work for ``POST /api/v1/jobs`` with no framework around it.

A plain WSGI callable, served by the same gunicorn line as the product (the Procfile's web line
with only the application swapped), so both sides get the same processes and threads. Per
request it does what the product's endpoint does, in the same order and against the same
PostgreSQL database and Redis db:

1. the token check: the same SELECT of ``authtoken_token`` joined to ``auth_user`` (the product's
   own tables, read only);
2. the multipart body parsed in memory (python-multipart; the product keeps uploads under 2 MiB
   in memory too);
3. the product's own pure probe (``apps.jobs.documents.probe``: type from the bytes, the PDF
   opened and every page's box checked) and the sha256 of the bytes;
4. the backpressure check: the same two queries (queued pages, split pages still waiting);
5. the file written under BENCH_MEDIA_ROOT/ref/ with O_EXCL, as Django's file storage does;
6. one INSERT in a transaction into ``ingest_ref_job``, a copy of ``jobs_job`` (same columns,
   defaults, indexes and the deferred foreign key to ``auth_user``), with the same values;
7. the ingest message, a Celery protocol-2 envelope of the same shape, LPUSHed onto a list, and
   the ``task-sent`` event PUBLISHed, as the product's settings make Celery do;
8. one log line and a 202 with the job as JSON.

Connections are kept: one psycopg connection per thread (the product keeps Django's for
DATABASE_CONN_MAX_AGE) and one redis-py pool per process. What the ratio prices is therefore
Django, DRF and Celery's publish path, not a lighter job.

Run: ``gunicorn bench.ingest_ref:app`` with the product's worker class, workers and threads.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import json
import logging
import os
import socket
import sys
import threading
import uuid
from pathlib import Path

import psycopg
import redis
from python_multipart.multipart import MultipartParser, parse_options_header

from apps.jobs.documents import InputError, probe

DB_URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/ocr_bench")
BROKER_URL = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/2")
MEDIA = Path(os.environ.get("BENCH_MEDIA_ROOT", "/tmp/media_bench")) / "ref"
QUEUE = "bench:ingest-ref"
TABLE = "ingest_ref_job"
MAX_PAGES = int(os.environ.get("OCR_MAX_PAGES", "200"))
MAX_PIXELS = int(os.environ.get("OCR_MAX_IMAGE_PIXELS", "60000000"))
MAX_UPLOAD = int(os.environ.get("OCR_MAX_UPLOAD_BYTES", str(10 * 1024 * 1024)))
BACKPRESSURE_PAGES = int(os.environ.get("OCR_BACKPRESSURE_PAGES", "2000"))
ENGINE = os.environ.get("OCR_ENGINE", "cpu")
CHUNK = 64 * 1024  # Django's multipart parser reads in 64 KiB chunks too

log = logging.getLogger("bench.ingest_ref")
if not log.handlers:
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [job=%(job_id)s] %(message)s"))
    log.addHandler(_handler)
    log.setLevel(logging.INFO)
    log.propagate = False

_local = threading.local()
_redis = redis.Redis.from_url(BROKER_URL)
_ORIGIN = f"{os.getpid()}@{socket.gethostname()}"
# Celery's event channel is "/<db>.celeryev/<type>"; the reference's own name keeps Flower off it.
EVENTS = f"/{_redis.connection_pool.connection_kwargs.get('db', 0)}.celeryev-ref/task.sent"

TOKEN_SQL = (
    'SELECT t."key", t."user_id", t."created", u."id", u."password", u."last_login", u."is_superuser", '
    'u."username", u."first_name", u."last_name", u."email", u."is_staff", u."is_active", u."date_joined" '
    'FROM "authtoken_token" t INNER JOIN "auth_user" u ON (t."user_id" = u."id") WHERE t."key" = %s LIMIT 21'
)
QUEUED_SQL = f'SELECT SUM("page_count") AS "n" FROM "{TABLE}" WHERE "status" = \'queued\''
SPLIT_SQL = (
    f'SELECT COUNT(*) FROM "jobs_page" INNER JOIN "{TABLE}" j ON ("jobs_page"."job_id" = j."id") '
    "WHERE (j.\"status\" = 'running' AND \"jobs_page\".\"status\" IN ('queued', 'detected'))"
)
INSERT_SQL = (
    f'INSERT INTO "{TABLE}" ("id", "owner_id", "tenant", "status", "engine", "options", "idempotency_key", '
    '"attempt", "filename", "source", "kind", "sha256", "size_bytes", "page_count", "pages_done", "pages_failed", '
    '"error_code", "error_message", "result_markdown", "result_json", "purged_at", "created_at", "started_at", '
    '"finished_at", "updated_at") VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, '
    "%s, %s, %s, %s, %s, %s, %s, %s)"
)


class Refused(Exception):
    def __init__(self, status: str, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _db() -> psycopg.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = psycopg.connect(DB_URL.replace("postgres://", "postgresql://", 1), autocommit=True)
        _local.conn = conn
    return conn


def _authenticate(environ: dict) -> tuple[int, str]:
    header = environ.get("HTTP_AUTHORIZATION", "")
    scheme, _, key = header.partition(" ")
    if scheme != "Token" or not key:
        raise Refused("401 Unauthorized", "auth:invalid-credentials", "send a token")
    row = _db().execute(TOKEN_SQL, (key,)).fetchone()
    if row is None or not row[12]:
        raise Refused("401 Unauthorized", "auth:invalid-credentials", "invalid token")
    return int(row[3]), str(row[7])


def _file_part(environ: dict) -> tuple[str, io.BytesIO]:
    """The multipart part named ``file``: its filename and its bytes, in memory."""
    content_type, params = parse_options_header(environ.get("CONTENT_TYPE", ""))
    boundary = params.get(b"boundary")
    if content_type != b"multipart/form-data" or not boundary:
        raise Refused("400 Bad Request", "request:invalid", "send multipart/form-data")
    length = int(environ.get("CONTENT_LENGTH") or 0)
    if length > MAX_UPLOAD + 64 * 1024:
        raise Refused("413 Request Entity Too Large", "input:too-large", f"the limit is {MAX_UPLOAD} bytes")

    parts: list[tuple[dict[bytes, bytes], io.BytesIO]] = []
    state: dict = {"field": b"", "value": b""}

    def on_part_begin() -> None:
        parts.append(({}, io.BytesIO()))

    def on_header_field(data: bytes, start: int, end: int) -> None:
        state["field"] += data[start:end]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        state["value"] += data[start:end]

    def on_header_end() -> None:
        parts[-1][0][state["field"].lower()] = state["value"]
        state["field"], state["value"] = b"", b""

    def on_part_data(data: bytes, start: int, end: int) -> None:
        parts[-1][1].write(data[start:end])

    parser = MultipartParser(
        boundary,
        {
            "on_part_begin": on_part_begin,
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_part_data": on_part_data,
        },
    )
    stream, left = environ["wsgi.input"], length
    while left > 0:
        chunk = stream.read(min(CHUNK, left))
        if not chunk:
            break
        left -= len(chunk)
        parser.write(chunk)
    parser.finalize()
    for headers, body in parts:
        _disposition, opts = parse_options_header(headers.get(b"content-disposition", b""))
        if opts.get(b"name") == b"file" and b"filename" in opts:
            body.seek(0)
            return opts[b"filename"].decode(errors="replace"), body
    raise Refused("400 Bad Request", "input:no-file", "send a multipart 'file'")


def _store(name: str, stream: io.BytesIO) -> None:
    path = MEDIA / name
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(stream.getbuffer())


def _publish(job_id: str) -> None:
    """The Celery protocol-2 message for ``workers.ingest`` and its task-sent event."""
    task_id = str(uuid.uuid4())
    body = base64.b64encode(
        json.dumps([[job_id], {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}]).encode()
    ).decode()
    message = {
        "body": body,
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {
            "lang": "py",
            "task": "workers.ingest",
            "id": task_id,
            "shadow": None,
            "eta": None,
            "expires": None,
            "group": None,
            "group_index": None,
            "retries": 0,
            "timelimit": [None, None],
            "root_id": task_id,
            "parent_id": None,
            "argsrepr": f"('{job_id}',)",
            "kwargsrepr": "{}",
            "origin": _ORIGIN,
            "ignore_result": False,
            "replaced_task_nesting": 0,
            "stamped_headers": None,
            "stamps": {},
        },
        "properties": {
            "correlation_id": task_id,
            "reply_to": str(uuid.uuid4()),
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": QUEUE},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": str(uuid.uuid4()),
        },
    }
    _redis.lpush(QUEUE, json.dumps(message))
    event = {
        "hostname": _ORIGIN,
        "utcoffset": 0,
        "pid": os.getpid(),
        "clock": 0,
        "uuid": task_id,
        "root_id": task_id,
        "parent_id": None,
        "name": "workers.ingest",
        "args": f"('{job_id}',)",
        "kwargs": "{}",
        "retries": 0,
        "eta": None,
        "expires": None,
        "queue": QUEUE,
        "exchange": "",
        "routing_key": QUEUE,
        "timestamp": dt.datetime.now(dt.UTC).timestamp(),
        "type": "task-sent",
    }
    envelope = {
        "body": base64.b64encode(json.dumps(event).encode()).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": {"hostname": _ORIGIN},
        "properties": {"delivery_mode": 1, "body_encoding": "base64", "delivery_tag": str(uuid.uuid4())},
    }
    _redis.publish(EVENTS, json.dumps(envelope))


def _create(environ: dict) -> tuple[str, dict]:
    owner_id, tenant = _authenticate(environ)
    filename, stream = _file_part(environ)
    size = stream.getbuffer().nbytes
    if size > MAX_UPLOAD:
        raise Refused("413 Request Entity Too Large", "input:too-large", f"the limit is {MAX_UPLOAD} bytes")
    try:
        found = probe(stream, max_pages=MAX_PAGES, max_pixels=MAX_PIXELS)
    except InputError as exc:
        raise Refused("400 Bad Request", exc.code, exc.message) from exc
    stream.seek(0)
    digest = hashlib.sha256()
    for chunk in iter(lambda: stream.read(1 << 20), b""):
        digest.update(chunk)
    stream.seek(0)

    conn = _db()
    queued = conn.execute(QUEUED_SQL).fetchone()[0] or 0
    split = conn.execute(SPLIT_SQL).fetchone()[0]
    if BACKPRESSURE_PAGES > 0 and queued + split > BACKPRESSURE_PAGES:
        raise Refused("503 Service Unavailable", "busy:backpressure", f"{queued + split} pages are waiting")

    job_id = uuid.uuid4()
    source = f"sources/{job_id}.{found.kind}"
    _store(source, stream)
    now = dt.datetime.now(dt.UTC)
    name = filename.replace("\\", "/").rsplit("/", 1)[-1]
    name = "".join(ch for ch in name if ch.isprintable()).strip()[:255]
    options = {"ocr": "auto"}
    with conn.transaction():
        conn.execute(
            INSERT_SQL,
            (
                job_id,
                owner_id,
                tenant,
                "queued",
                ENGINE,
                psycopg.types.json.Jsonb(options),
                "",
                1,
                name,
                source,
                found.kind,
                digest.hexdigest(),
                size,
                found.page_count,
                0,
                0,
                "",
                "",
                "",
                "",
                None,
                now,
                None,
                None,
                now,
            ),
        )
    _publish(str(job_id))
    log.info("job submitted", extra={"job_id": str(job_id)})
    return "202 Accepted", {
        "id": str(job_id),
        "status": "queued",
        "filename": name,
        "kind": found.kind,
        "engine": ENGINE,
        "sha256": digest.hexdigest(),
        "size_bytes": size,
        "attempt": 1,
        "progress": {"pages_done": 0, "pages_failed": 0, "pages_total": found.page_count},
        "error": None,
        "options": options,
        "created_at": now.isoformat().replace("+00:00", "Z"),
        "started_at": None,
        "finished_at": None,
        "links": {"self": f"http://{environ.get('HTTP_HOST', 'localhost')}/api/v1/jobs/{job_id}"},
    }


def app(environ: dict, start_response):
    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
    if path == "/healthz":
        status, body, headers = "200 OK", {"status": "ok"}, []
    elif path.rstrip("/") == "/api/v1/jobs" and method == "POST":
        try:
            status, body = _create(environ)
            headers = [("Location", body["links"]["self"])]
        except Refused as exc:
            status, body, headers = exc.status, {"error": {"code": exc.code, "message": exc.message}}, []
    else:
        status, body, headers = "404 Not Found", {"error": {"code": "not-found", "message": path}}, []
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *headers])
    return [data]
