"""The run's plan: how big each size is, when each fault strikes, where its artifacts go."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "tests" / "artifacts" / "chaos"


@dataclass(frozen=True)
class Size:
    jobs: int
    clients: int
    kills: int
    scan_share: float  # share of jobs that are scans (OCR); the rest are born-digital
    kill_every_s: float  # mean pause between kills
    outage_s: float  # how long Redis stays down
    pg_outage_s: float  # how long PostgreSQL stays down
    drain_timeout_s: float
    hosts: int = 1  # worker hosts in network namespaces of their own, beside the machine's workers
    partition_s: float = 45  # how long one host is cut off from Redis and PostgreSQL
    # Each client's pause between two polls: its share of the API's load once it has submitted.
    # 1 s for 50 clients is 50 requests/s; 100 clients at 3 s keep the polls under 40/s on 2 cores.
    poll_every_s: float = 1.0


SIZES = {
    "ci": Size(
        jobs=100,
        clients=10,
        kills=6,
        scan_share=0.15,
        kill_every_s=4,
        outage_s=8,
        pg_outage_s=8,
        drain_timeout_s=600,
        hosts=1,
        partition_s=40,
    ),
    "full": Size(
        jobs=1000,
        clients=50,
        kills=20,
        scan_share=0.05,
        kill_every_s=10,
        outage_s=10,
        pg_outage_s=20,
        drain_timeout_s=2400,
        hosts=2,
        partition_s=50,
    ),
    # The run by hand (issue 24): hours on a 2-core box, never in CI. Born-digital mostly: a scan
    # page costs seconds of OCR, so 1 % scans is already about a sixth of the CPU.
    "big": Size(
        jobs=10_000,
        clients=100,
        kills=40,
        scan_share=0.01,
        kill_every_s=30,
        outage_s=15,
        pg_outage_s=30,
        drain_timeout_s=3 * 3600,
        hosts=3,
        partition_s=50,
        poll_every_s=3.0,
    ),
}
# When the faults strike: Redis once this share of the jobs is accepted, PostgreSQL once this share
# is accepted and Redis is back (one outage at a time, so each one's refusals are its own).
REDIS_AT = 0.4
POSTGRES_AT = 0.65
# Above this a claim is handed on by the sweep; the partition outlasts it so that the cut-off
# host's pages are taken over while it still holds them.
STALE_AFTER_S = 25
SETTLE_S = 90  # the longest the next fault waits for the cut-off host's late writes
WATCHERS = 2  # readers polling beside the clients (``watcher``)
