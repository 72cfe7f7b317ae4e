"""Fair dispatch: per-tenant lanes in front of the Celery queues, so that no tenant's backlog or
slow document holds a stage's slots while another tenant's page waits behind it.

The queues are FIFO Redis lists per hardware tier: 5,000 pages of one tenant's TIFF sent to
``layout`` before another tenant's one page made that page wait for all 5,000. So work for a
stage (ingest, layout, recognition) is not put on its queue as itself. Each item (a job or page
id) goes to its tenant's lane, the Redis list ``lane:<stage>:<tenant>``, and an interchangeable
token (the stage's task with no id) goes to the stage's Celery queue. A worker that receives a
token takes the next item from the lanes (``take``): of the tenants with work waiting in that
stage, the one with the fewest items of the stage in flight, and round-robin among equals. A
tenant with one page waiting is served at the next free slot, however long another's lane is;
a tenant whose documents already run in every slot is the last to get the next one.

What stays as it was: KEDA scales on pages and jobs in PostgreSQL, which lanes do not touch; the
queue holds one token per waiting item, so its length is what waits (/metrics reports it, the
sweep's room is counted on it); the collector
batches tokens into passes as it batched pages; claims, attempts and the sweep are unchanged
(an item whose token was lost, or whose worker died after taking it, is a page or job the sweep
finds stale and sends again). Work sent with a delay (a retry's backoff) and the sweep's
re-sends go straight to the queue with their ids (``direct``): a backoff must not be shortened
by another token, and recovery is already bounded by the sweep's room.

In flight is a sorted set per stage and tenant (``inflight:<stage>:<tenant>``) of the items taken,
each expiring at the stage's hard time limit, so a worker killed before it released its items
only skews the count until then. Pushing and taking are Lua scripts: one atomic step each.

A lane is keyed by stage and tenant only; a separate class of work (a bulk lane with its own
queues, say) is a stage name of its own here (``bulk-layout``), with its own tokens on its own
queue, and gets the same per-tenant fairness within it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import urlparse

import redis
from celery import current_app
from django.conf import settings

_PUSH = """
local lane = ARGV[1] .. ARGV[2]
for i = 3, #ARGV do redis.call('RPUSH', lane, ARGV[i]) end
if not redis.call('LPOS', KEYS[1], ARGV[2]) then redis.call('RPUSH', KEYS[1], ARGV[2]) end
return #ARGV - 2
"""

# KEYS[1]: the stage's ring of tenants with work waiting. ARGV: lane prefix, in-flight prefix,
# now, expiry of what is taken, how many items.
_TAKE = """
local out = {}
for k = 1, tonumber(ARGV[5]) do
  local best, fewest = nil, nil
  for _, tenant in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
    if redis.call('LLEN', ARGV[1] .. tenant) == 0 then
      redis.call('LREM', KEYS[1], 0, tenant)
    else
      local flying = ARGV[2] .. tenant
      redis.call('ZREMRANGEBYSCORE', flying, '-inf', ARGV[3])
      local n = redis.call('ZCARD', flying)
      if fewest == nil or n < fewest then best, fewest = tenant, n end
    end
  end
  if best == nil then break end
  local item = redis.call('LPOP', ARGV[1] .. best)
  redis.call('ZADD', ARGV[2] .. best, ARGV[4], item)
  redis.call('EXPIREAT', ARGV[2] .. best, math.ceil(tonumber(ARGV[4])))
  -- Round-robin among tenants with as few in flight: the one served goes to the back.
  redis.call('LREM', KEYS[1], 0, best)
  if redis.call('LLEN', ARGV[1] .. best) > 0 then redis.call('RPUSH', KEYS[1], best) end
  table.insert(out, best)
  table.insert(out, item)
end
return out
"""

_clients: dict[str, redis.Redis] = {}


def enabled() -> bool:
    """Lanes need the Redis broker; eager mode (the embedded CLI) and memory:// send ids directly."""
    if current_app.conf.task_always_eager:
        return False
    return urlparse(settings.CELERY_BROKER_URL).scheme in ("redis", "rediss", "unix")


def _redis() -> redis.Redis:
    url = settings.CELERY_BROKER_URL
    client = _clients.get(url)
    if client is None:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
        _clients[url] = client
    return client


def _ring(stage: str) -> str:
    return f"lanes:{stage}"


def push(stage: str, tenant: str, items: Sequence[object]) -> None:
    """Put ``items`` in the tenant's lane of ``stage``; the caller then sends one token per item."""
    if items:
        _redis().eval(_PUSH, 1, _ring(stage), f"lane:{stage}:", tenant, *[str(i) for i in items])


def take(stage: str, n: int = 1, hold_s: float | None = None) -> list[tuple[str, str]]:
    """Up to ``n`` items of ``stage``, each as (tenant, item), fairly across tenants; each is
    counted in flight for its tenant until ``release`` (or ``hold_s``, the stage's hard limit)."""
    now = time.time()
    hold = hold_s if hold_s is not None else settings.OCR_TASK_HARD_LIMIT
    flat = _redis().eval(_TAKE, 1, _ring(stage), f"lane:{stage}:", f"inflight:{stage}:", now, now + hold, n)
    pairs = [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]
    return [(t.decode() if isinstance(t, bytes) else t, i.decode() if isinstance(i, bytes) else i) for t, i in pairs]


# A token takes at most this many items no longer waiting before it gives up (see ``take_live``).
MAX_SKIPS = 100


def take_live(stage: str, n: int, hold_s: float, live: Callable[[list[str]], set[str]]) -> list[tuple[str, str]]:
    """Like ``take``, but items ``live`` says no longer wait (done, cancelled, gone, or re-sent
    and taken already) are released and replaced: a lane can hold more items than the queue
    holds tokens (a token lost with a broker error, a queue purged), and a token spent on such an
    item would leave a live one waiting for the sweep."""
    kept: list[tuple[str, str]] = []
    skipped = 0
    while len(kept) < n and skipped <= MAX_SKIPS:
        taken = take(stage, n - len(kept), hold_s)
        if not taken:
            break
        alive = live([item for _, item in taken])
        dead = [pair for pair in taken if pair[1] not in alive]
        if dead:
            release(stage, dead)
            skipped += len(dead)
        kept += [pair for pair in taken if pair[1] in alive]
    return kept


def release(stage: str, taken: Iterable[tuple[str, str]]) -> None:
    """The items are done (or given up): no longer in flight for their tenants."""
    pipe = _redis().pipeline(transaction=False)
    for tenant, item in taken:
        pipe.zrem(f"inflight:{stage}:{tenant}", item)
    pipe.execute()


def waiting(stage: str) -> dict[str, int]:
    """Items waiting per tenant in ``stage``'s lanes (for operators and tests)."""
    client = _redis()
    tenants = [t.decode() for t in client.lrange(_ring(stage), 0, -1)]
    return {t: client.llen(f"lane:{stage}:{t}") for t in tenants}


def in_flight(stage: str, tenant: str) -> int:
    client = _redis()
    key = f"inflight:{stage}:{tenant}"
    client.zremrangebyscore(key, "-inf", time.time())
    return client.zcard(key)
