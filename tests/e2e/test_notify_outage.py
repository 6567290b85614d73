"""A webhook receiver down for a while (time compressed in `make test`: about 15 s, with the
channel's backoff at 250 ms doubling to 2 s; `make test-long` keeps it down for a full minute
with a 1 s to 15 s backoff), on both profiles, with real processes:

the receiver first answers 503, then refuses connections; meanwhile the control process is
killed (SIGKILL) and started again -- long enough to misfire its every-2-seconds trigger --
and only then does the receiver come back. Every Run that failed (or was lost in the kill),
the misfire and the recovery that followed are each delivered, every delivery exactly once
per idempotency id once the receiver dedupes, each with a valid signature; none is lost.

SQLite: one `ql serve`. PostgreSQL: two `ql control` replicas (both dispatching, SKIP
LOCKED) and a `ql worker`, channels and rules written as ql_admin, the outbox read as
ql_runtime.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testkit.cluster import Replica, Worker
from tests.support.pg import PgTestDatabase
from tests.support.ql import Ql, wait_for
from tests.support.test_notify_receivers import WebhookReceiver, independent_signature_ok

pytestmark = pytest.mark.slow

HOOK_SECRET = "outage-hmac-k3y"
ENV = {"HOOK_KEY": HOOK_SECRET}


@dataclass
class Profile:
    admin: Ql  # definitions, channels and rules
    reader: Ql  # deliveries and Runs
    start: Callable[[], None]
    kill: Callable[[], None]  # SIGKILL the control process(es)
    stop: Callable[[], None]


def deliveries(reader: Ql) -> list[dict[str, Any]]:
    found = reader.json("notify", "deliveries", "--limit", "10000")
    assert isinstance(found, list)
    return found


def attempts(reader: Ql) -> int:
    """Delivery attempts so far, of every notification."""
    return sum(int(d["attempts"]) for d in deliveries(reader))


def settled(profile: Profile) -> bool:
    """Every Run has ended, every one that ended badly has its delivery, and nothing is still
    waiting to be sent."""
    runs = profile.reader.json("run", "list", "--project", "demo", "--limit", "10000")
    if any(r["status"] not in ("succeeded", "failed", "cancelled", "timed_out", "lost")
           for r in runs):
        return False
    items = deliveries(profile.reader)
    notified = {d["run"] for d in items if d["run"]}
    bad = {r["id"] for r in runs if r["status"] in ("failed", "lost")}
    return bad <= notified and all(d["status"] == "delivered" for d in items)


def outage(profile: Profile, receiver: WebhookReceiver, *, down_s: float = 0.0,
           backoff: tuple[str, str] = ("250ms", "2s")) -> dict[str, int]:
    """``down_s``: the receiver stays unreachable (503, then refused) at least this long."""
    admin = profile.admin
    admin.run("project", "create", "demo")
    admin.run("task", "publish", "--project", "demo", "--task", "fail", "--shell", "exit 3")
    admin.run("trigger", "publish", "--project", "demo", "--trigger", "every2", "--task", "fail",
              "--cron", "*/2 * * * * *", "--timezone", "UTC")
    admin.run("notify", "channel", "add", "ops", "--webhook", receiver.url, "--secret-env",
              "HOOK_KEY", "--retry-backoff", backoff[0], "--retry-max-backoff", backoff[1],
              "--max-attempts", "100", "--timeout", "2s")
    admin.run("notify", "rule", "add", "--channel", "ops", "--project", "demo", "--events",
              "failed,lost,misfired,recovered")
    receiver.mode = "error"
    down_since = time.monotonic()
    profile.start()
    wait_for(lambda: len([d for d in deliveries(profile.reader) if d["attempts"] >= 2]) >= 2,
             60, "deliveries failing and backing off", interval=0.5)
    receiver.stop()  # from now on connections are refused
    tried = attempts(profile.reader)
    wait_for(lambda: attempts(profile.reader) > tried, 30, "a delivery refused", interval=0.5)
    profile.kill()
    killed_ms = int(time.time() * 1000)
    # an occurrence of the every-2-seconds trigger falls in the downtime and is more than the
    # 1 s misfire grace old at the restart: the restart misfires
    missed = -(-(killed_ms + 1) // 2000) * 2000
    while time.time() * 1000 < missed + 1_500:
        time.sleep(0.05)
    profile.start()
    wait_for(lambda: any(d["event"] == "trigger.misfired" for d in deliveries(profile.reader)),
             30, "the misfire to be enqueued", interval=0.5)
    # the restarted process tries again, against a receiver still down
    tried = attempts(profile.reader)
    wait_for(lambda: attempts(profile.reader) > tried, 30, "a delivery refused after the restart",
             interval=0.5)
    time.sleep(max(0.0, down_since + down_s - time.monotonic()))
    waiting = [d for d in deliveries(profile.reader) if d["status"] != "delivered"]
    down_for = time.monotonic() - down_since
    receiver.mode = "ok"
    receiver.start()
    wait_for(lambda: any(d["event"] == "trigger.recovered" for d in deliveries(profile.reader)),
             30, "the recovery to be enqueued", interval=0.5)
    # the failures the checks below count: a Run a worker lost in the kill is not one, and
    # the recovery may be enqueued before a Run admitted after the restart has failed
    wait_for(lambda: sum(d["event"] == "run.failed" for d in deliveries(profile.reader)) >= 3,
             60, "three failed Runs to be enqueued", interval=0.5)
    admin.run("trigger", "disable", "--project", "demo", "--trigger", "every2")
    wait_for(lambda: settled(profile), 90, "every notification to be delivered", interval=0.5)
    profile.stop()

    final = deliveries(profile.reader)
    runs = profile.reader.json("run", "list", "--project", "demo", "--limit", "10000")
    accepted = receiver.accepted_ids()
    got = receiver.received()
    assert waiting, "nothing was waiting while the receiver was down"
    assert all(d["status"] == "delivered" for d in final), final
    assert set(accepted) == {d["id"] for d in final}  # each arrived; nothing else did
    bad = {(r["id"], "run." + r["status"]) for r in runs if r["status"] in ("failed", "lost")}
    per_run = Counter((d["run"], d["event"]) for d in final if d["run"])
    assert set(per_run) == bad and set(per_run.values()) == {1}
    events = Counter(d["event"] for d in final)
    assert events["run.failed"] >= 3
    assert events["trigger.misfired"] >= 1 and events["trigger.recovered"] >= 1
    misfires = {d["source"].split(":", 1)[1] for d in final if d["event"] == "trigger.misfired"}
    recoveries = {d["source"].split(":", 1)[1] for d in final
                  if d["event"] == "trigger.recovered"}
    assert recoveries <= misfires  # each recovery follows a misfire it names
    assert any(r.answered == 503 for r in got)
    assert max(d["attempts"] for d in final) >= 3  # retried across the outage
    assert all(r.verified and independent_signature_ok(HOOK_SECRET, r.headers, r.body)
               for r in got if r.answered == 200)
    documents = {r.document["id"]: r.document for r in got if r.answered == 200}
    assert {doc["event"] for doc in documents.values()} == set(events)
    return {"notifications": len(final), "requests": len(got),
            "accepted": sum(accepted.values()),
            "duplicates_after_200": sum(n - 1 for n in accepted.values()),
            "max_attempts": max(d["attempts"] for d in final), "down_s": round(down_for)}


def test_sqlite_a_receiver_down_across_a_serve_restart_misses_nothing(tmp_path: Path) -> None:
    sqlite_outage(tmp_path)


@pytest.mark.long
def test_sqlite_a_receiver_down_for_a_full_minute_misses_nothing(tmp_path: Path) -> None:
    """The same at real scale (`make test-long`): the receiver is unreachable for 60 s and
    the channel backs off from 1 s to 15 s, as a production channel would."""
    stats = sqlite_outage(tmp_path, down_s=60.0, backoff=("1s", "15s"))
    assert stats["down_s"] >= 60


def sqlite_outage(tmp_path: Path, *, down_s: float = 0.0,
                  backoff: tuple[str, str] = ("250ms", "2s")) -> dict[str, int]:
    ql = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path, env=ENV)
    ql.run("db", "migrate")
    servers: list[subprocess.Popen[str]] = []

    def start() -> None:
        servers.append(ql.start("serve", "--interval", "250ms", "--grace", "1s",
                                stdout=tmp_path / f"serve.{len(servers)}.log"))

    def kill() -> None:
        servers[-1].send_signal(signal.SIGKILL)
        servers[-1].wait(10)

    def stop() -> None:
        servers[-1].send_signal(signal.SIGTERM)
        assert servers[-1].wait(30) == 0

    receiver = WebhookReceiver(HOOK_SECRET).start()
    try:
        stats = outage(Profile(admin=ql, reader=ql, start=start, kill=kill, stop=stop), receiver,
                       down_s=down_s, backoff=backoff)
    finally:
        receiver.stop()
        for server in servers:
            if server.poll() is None:
                server.kill()
                server.wait(10)
    print("sqlite outage:", stats)
    log = "".join(p.read_text() for p in sorted(tmp_path.glob("serve.*.log")))
    assert "QL_NOTIFY_RETRY" in log and HOOK_SECRET not in log
    return stats


def test_postgres_a_receiver_down_across_replica_restarts_misses_nothing(
        pg_db: PgTestDatabase, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}
    admin = Ql(pg_db.url("ql_admin"), cwd=tmp_path, env=ENV)
    reader = Ql(pg_db.url("ql_runtime"), cwd=tmp_path, env=ENV)
    admin.env = {**env, **ENV, "QL_DATABASE_URL": pg_db.url("ql_admin")}
    reader.env = {**env, **ENV, "QL_DATABASE_URL": pg_db.url("ql_runtime")}
    # restarted at once under fresh ids (a killed replica's id stays registered until its
    # heartbeat is 30 s old); a 1 s grace, below the lease: occurrences a killed replica held
    # may misfire, which this test accepts (it counts notifications, not admissions)
    replicas = [Replica(owner, pg_db.url("ql_runtime"), tmp_path, lease_ms=5_000, grace_ms=1_000,
                        extra=("--interval-ms", "250", "--allow-lease-over-grace"),
                        fresh_id_per_start=True)
                for owner in ("r1", "r2")]
    worker = Worker("w1", pg_db.url("ql_worker"), tmp_path, poll_ms=250).start()

    def start() -> None:
        for replica in replicas:
            replica.start()
        for replica in replicas:
            replica.wait_ready()

    def kill() -> None:
        for replica in replicas:
            replica.kill()

    def stop() -> None:
        for replica in replicas:
            assert replica.stop() == 0

    receiver = WebhookReceiver(HOOK_SECRET).start()
    try:
        worker.wait_ready()
        stats = outage(Profile(admin=admin, reader=reader, start=start, kill=kill, stop=stop),
                       receiver)
    finally:
        receiver.stop()
        for process in (*replicas, worker):
            if process.process is not None and process.process.poll() is None:
                process.kill()
    print("postgres outage:", stats)
    logs = "".join(p.read_text() for p in sorted(tmp_path.glob("r?.*.log")))
    assert "QL_NOTIFY_RETRY" in logs and HOOK_SECRET not in logs
