"""APScheduler 4 as a peer in the burst: ``setup`` adds N cron schedules whose next fire
time is the same instant, ``run`` is one scheduler process (role ``scheduler``: it turns
due schedules into jobs and runs none), all on a SQLAlchemyDataStore (asyncpg) in its own
PostgreSQL database. The harness reads the jobs table.

    python -m benchmarks.peers.apscheduler_peer setup --url URL --count N --at-ms T
    python -m benchmarks.peers.apscheduler_peer run --url URL --identity NAME
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime

from apscheduler import AsyncScheduler, ConflictPolicy, SchedulerRole
from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore
from apscheduler.triggers.cron import CronTrigger

CONCURRENT_ADDS = 16


def noop() -> None:
    """The scheduled task (never run here: the schedulers only create jobs)."""


async def setup(url: str, count: int, at_ms: int) -> None:
    at = datetime.fromtimestamp(at_ms / 1000, UTC)
    store = SQLAlchemyDataStore(url)
    async with AsyncScheduler(store, role=SchedulerRole.scheduler) as scheduler:
        gate = asyncio.Semaphore(CONCURRENT_ADDS)

        async def add(n: int) -> None:
            # one trigger object per schedule: a trigger keeps its own position
            trigger = CronTrigger(hour=at.hour, minute=at.minute, second=at.second,
                                  timezone="UTC")
            async with gate:
                await scheduler.add_schedule(noop, trigger, id=f"s{n:07d}",
                                             conflict_policy=ConflictPolicy.replace)

        await asyncio.gather(*(add(n) for n in range(count)))
    print(f"added {count} schedules firing at {at.isoformat()}", flush=True)


async def run(url: str, identity: str) -> None:
    store = SQLAlchemyDataStore(url)
    async with AsyncScheduler(store, role=SchedulerRole.scheduler, identity=identity) as scheduler:
        print("ready", flush=True)
        await scheduler.run_until_stopped()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.apscheduler_peer")
    parser.add_argument("action", choices=("setup", "run"))
    parser.add_argument("--url", required=True, help="postgresql+asyncpg://... URL")
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--at-ms", type=int, default=0)
    parser.add_argument("--identity", default="peer-1")
    ns = parser.parse_args()
    if ns.action == "setup":
        asyncio.run(setup(ns.url, ns.count, ns.at_ms))
    else:
        asyncio.run(run(ns.url, ns.identity))
    return 0


if __name__ == "__main__":
    sys.exit(main())
