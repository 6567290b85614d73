"""procrastinate as a peer in the burst: one worker process with N periodic tasks whose
cron fires at the same instant. Its periodic deferrer defers one job per task and tick
(procrastinate_periodic_defers keeps several workers from deferring the same one twice).
The worker listens to a queue nobody uses, so the deferred jobs stay in `todo` and the
harness reads procrastinate_jobs / procrastinate_events.

    python -m benchmarks.peers.procrastinate_peer schema --dsn DSN
    python -m benchmarks.peers.procrastinate_peer run --dsn DSN --count N --at-ms T --identity W
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime

from procrastinate import App, PsycopgConnector

PERIODIC_QUEUE = "bench-periodic"
IDLE_QUEUE = "bench-nobody"


def build(dsn: str, count: int, at_ms: int) -> App:
    app = App(connector=PsycopgConnector(conninfo=dsn))
    at = datetime.fromtimestamp(at_ms / 1000, UTC) if at_ms else datetime.now(UTC)

    @app.task(name="noop", queue=PERIODIC_QUEUE)
    def noop(timestamp: int) -> None:
        """Never run here."""

    # croniter's six-field form puts the seconds last
    cron = f"{at.minute} {at.hour} * * * {at.second}"
    for n in range(count):
        app.periodic(cron=cron, periodic_id=f"p{n:07d}")(noop)
    return app


async def schema(dsn: str) -> None:
    app = build(dsn, 0, 0)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
    print("schema applied", flush=True)


async def run(dsn: str, count: int, at_ms: int, identity: str) -> None:
    app = build(dsn, count, at_ms)
    async with app.open_async():
        print("ready", flush=True)
        await app.run_worker_async(queues=[IDLE_QUEUE], name=identity)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.procrastinate_peer")
    parser.add_argument("action", choices=("schema", "run"))
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--count", type=int, default=0)
    parser.add_argument("--at-ms", type=int, default=0)
    parser.add_argument("--identity", default="worker-1")
    ns = parser.parse_args()
    if ns.action == "schema":
        asyncio.run(schema(ns.dsn))
    else:
        asyncio.run(run(ns.dsn, ns.count, ns.at_ms, ns.identity))
    return 0


if __name__ == "__main__":
    sys.exit(main())
