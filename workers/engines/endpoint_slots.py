"""One in-flight cap per vLLM endpoint, shared by every worker process of every pod (Redis).

Each worker process bounds its own requests (``VLLM_MAX_IN_FLIGHT``); this bounds their sum, so
scaling the ocr tier out adds pages in hand, never requests beyond what the server batches. A slot
is a lease: a member of one sorted set per endpoint scored by the Redis server's clock, taken and
expired in one Lua script. A holder that dies (SIGKILL, OOM, a node lost) frees its slot when its
lease ends, ``lease_s`` after it was taken, which is longer than any one request may run (each
attempt is bounded by ``VLLM_TIMEOUT_S``). The libraries on PyPI that offer a Redis semaphore keep
tokens in a list with one expiry for the whole key, which a busy endpoint keeps refreshing, so a
killed holder's token would be lost for as long as traffic lasts.

The server's clock, not the pods': leases taken by pods whose clocks disagree expire together.
No Django and no Celery here (engines import neither).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
import uuid
from collections.abc import Callable

import redis.asyncio as aioredis

# KEYS[1]: the endpoint's set. ARGV: limit, lease seconds, token. Returns 1 when taken.
_TAKE = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], t, ARGV[3])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) * 2)
  return 1
end
return 0
"""


class NoSlot(Exception):
    """Every slot of the endpoint stayed taken for the whole wait."""


class Drained(Exception):
    """The caller asked to stop waiting (the worker is shutting down)."""


class EndpointSlots:
    def __init__(self, url: str, endpoint: str, limit: int, lease_s: float) -> None:
        self.limit = limit
        self.lease_s = lease_s
        # One set per endpoint URL, whatever the worker's own name for it.
        self.key = "ocr:vllm-slots:" + hashlib.sha1(endpoint.encode()).hexdigest()[:16]
        self._redis = aioredis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self._take = self._redis.register_script(_TAKE)

    async def acquire(self, wait_s: float, stopping: Callable[[], bool]) -> str:
        """A slot's token, waiting up to ``wait_s``; ``NoSlot`` past it, ``Drained`` as soon as
        ``stopping()`` says so. Polled with jitter: a freed slot goes to whoever asks first."""
        token = uuid.uuid4().hex
        give_up = time.monotonic() + wait_s
        pause = 0.02
        while True:
            if stopping():
                raise Drained
            if await self._take(keys=[self.key], args=[self.limit, self.lease_s, token]):
                return token
            if time.monotonic() >= give_up:
                raise NoSlot(f"all {self.limit} slots of the endpoint busy for {wait_s:.0f}s")
            await asyncio.sleep(random.uniform(0, pause))
            pause = min(pause * 2, 0.25)

    async def release(self, token: str) -> None:
        await self._redis.zrem(self.key, token)

    async def held(self) -> int:
        return int(await self._redis.zcard(self.key))

    async def close(self) -> None:
        await self._redis.aclose()
