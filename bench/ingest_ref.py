"""P4's reference: the least an ingest endpoint can do, in Starlette + redis-py under uvicorn.

``POST /api/v1/jobs`` (multipart ``file``) stores the file under BENCH_MEDIA_ROOT/ref/ and pushes
its id onto a Redis list, then answers 202 with the id. No auth, no type check, no page count,
no database: what the real endpoint does on top of this is what P4's ratio prices.

Run: ``uvicorn bench.ingest_ref:app --workers N``.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import redis.asyncio as redis
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

MEDIA = Path(os.environ.get("BENCH_MEDIA_ROOT", "/tmp/media_bench")) / "ref"
QUEUE = "bench:ingest-ref"
_redis = redis.Redis.from_url(os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/2"))


def _store(path: Path, data: bytes) -> None:
    path.write_bytes(data)


async def create(request: Request) -> JSONResponse:
    form = await request.form()
    upload = form.get("file")
    if upload is None or isinstance(upload, str):
        return JSONResponse({"error": {"code": "input:no-file", "message": "send a multipart 'file'"}}, 400)
    job_id = str(uuid.uuid4())
    data = await upload.read()
    MEDIA.mkdir(parents=True, exist_ok=True)
    await run_in_threadpool(_store, MEDIA / f"{job_id}.pdf", data)  # file I/O off the event loop
    await _redis.lpush(QUEUE, job_id)
    return JSONResponse({"id": job_id, "status": "queued"}, status_code=202)


async def healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


app = Starlette(routes=[Route("/api/v1/jobs", create, methods=["POST"]), Route("/healthz", healthz)])
