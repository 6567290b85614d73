"""Three `ql control` replicas against one database, as a new user would run them.

50 per-second triggers for 36 s, lease 5 s, grace 30 s; one replica is killed with
SIGKILL at 12 s and restarted under the same owner id at 24 s (each phase more than twice the
lease): it waits until its old registration is 30 s without a heartbeat, then takes its id
over and is ready again (the run lasts until then). Every
occurrence from the moment the replicas are ready until 2 s before they stop must be
admitted exactly once (those before are the misfire policy's business). The lag figures are printed (run with -s to see them).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from qinglong.domain.cron import CronSchedule
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.definitions.params import TriggerPublishParams
from qinglong.storage.postgres.connection import SingleConnector
from qinglong.storage.postgres.driver import open_postgres
from testkit.cluster import Replica, percentile, tally
from tests.support.pg import PgTestDatabase
from tests.support.ql import wait_for
from tests.support.ql_process import run_ql

pytestmark = pytest.mark.slow

TRIGGERS = 50
SECONDS = 36
KILL_AT, RESTART_AT = 12, 24


def db_now(db: psycopg.Connection[dict[str, object]]) -> int:
    row = db.execute("SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS n").fetchone()
    assert row is not None
    return int(row["n"])  # type: ignore[call-overload]


def ql(*args: str) -> None:
    done = run_ql([*args], timeout=60)
    assert done.returncode == 0, done.stderr


def test_three_replicas_fifty_triggers_kill_and_restart_exactly_once(
    pg_db: PgTestDatabase, tmp_path: Path
) -> None:
    admin, runtime = pg_db.url("ql_admin"), pg_db.url("ql_runtime")
    ql("project", "create", "demo", "--database-url", admin)
    ql("task", "publish", "--database-url", admin, "--project", "demo", "--task", "hello",
       "--argv", "/bin/true")
    db = pg_db.superuser()
    ql("trigger", "publish", "--project", "demo", "--trigger", "t00", "--task", "hello",
       "--cron", "* * * * * *", "--timezone", "UTC", "--misfire", "skip", "--database-url", admin)
    connector = SingleConnector(admin)
    publisher = DefinitionStore(open_postgres(connector))  # the other 49 without 49 processes
    for i in range(1, TRIGGERS):
        publisher.trigger_publish(TriggerPublishParams(
            project_id="demo", trigger_id=f"t{i:02d}", task_id="hello", expression="* * * * * *",
            timezone="UTC", misfire_policy="skip"))
    connector.close()
    replicas = [Replica(f"r{n}", runtime, tmp_path) for n in range(1, 4)]
    for replica in replicas:
        replica.start()
    try:
        for replica in replicas:
            replica.wait_ready()
        # the phases count from readiness: three replicas may take seconds to start on a
        # loaded machine, and the window below must still hold SECONDS - 2 of admissions
        started = time.monotonic()
        start_ms = db_now(db)
        time.sleep(max(0.0, KILL_AT - (time.monotonic() - started)))
        replicas[0].kill()
        time.sleep(max(0.0, RESTART_AT - (time.monotonic() - started)))
        replicas[0].start()
        replicas[0].wait_ready(timeout=60)  # its old registration goes stale 30 s after its last beat
        rejoined = len(replicas[0].events())
        time.sleep(max(0.0, SECONDS - (time.monotonic() - started)))
        end_ms = db_now(db) - 2_000
        # The restarted replica rejoined the cluster: once the other two stop, it admits alone.
        # (While all three ran it need not have admitted anything: the first replica to claim
        # each second takes every due row, and one may keep losing that race.)
        for replica in replicas[1:]:
            replica.stop()
        wait_for(lambda: any(e.get("event") == "admitted"
                             for e in replicas[0].events()[rejoined:]),
                 30, "the restarted replica to admit once it is alone")
    finally:
        codes = [r.stop() for r in replicas]
    assert codes == [0, 0, 0]
    with psycopg.connect(runtime, row_factory=dict_row) as conn:
        runs = conn.execute("SELECT trigger_id, scheduled_for_ms, created_at_ms FROM qinglong.runs").fetchall()
        revisions = conn.execute("SELECT trigger_id, created_at_ms FROM qinglong.trigger_revisions").fetchall()
        shapes = conn.execute(
            "SELECT r.id, (SELECT count(*) FROM qinglong.run_attempts a WHERE a.run_id = r.id) AS a, "
            "(SELECT count(*) FROM qinglong.run_events e WHERE e.run_id = r.id) AS e "
            "FROM qinglong.runs r").fetchall()
    assert all((s["a"], s["e"]) == (1, 2) for s in shapes)
    published = {r["trigger_id"]: int(r["created_at_ms"]) for r in revisions}
    schedule = CronSchedule.parse("* * * * * *", "UTC")
    totals = {"expected": 0, "admitted": 0, "duplicates": 0, "gaps": 0, "spurious": 0}
    lags: list[int] = []
    for trigger, publish_ms in published.items():
        mine = [r for r in runs if r["trigger_id"] == trigger]
        t = tally(mine, schedule, max(publish_ms, start_ms), end_ms)
        totals["expected"] += t.expected
        totals["admitted"] += t.admitted
        totals["duplicates"] += t.duplicates
        totals["gaps"] += len(t.gaps)
        totals["spurious"] += len(t.spurious)
        lags += t.lags_ms
    by_owner = {r.owner: sum(1 for e in r.events() if e.get("event") == "admitted") for r in replicas}
    print(f"\ncluster e2e ({pg_db.server.name}): {totals}; per replica {by_owner}; "
          f"lag p50 {percentile(lags, 50)} ms, p99 {percentile(lags, 99)} ms, max {max(lags)} ms")
    assert totals["duplicates"] == 0 and totals["gaps"] == 0 and totals["spurious"] == 0
    assert totals["expected"] >= TRIGGERS * (SECONDS - 8)
    assert totals["admitted"] == totals["expected"]
    # The replicas' own admissions cover the window (they also admitted before and after it),
    # and the work moved between replicas: r1 admitted alone at the end, and another while r1
    # was down.
    assert sum(by_owner.values()) >= totals["admitted"], by_owner
    assert sum(1 for n in by_owner.values() if n > 0) >= 2, by_owner
    # `ql audit` agrees (its own cron expansion, plus the claim log and fences).
    audited = run_ql(["audit", "--database-url", runtime,
                      "--from", str(start_ms), "--to", str(end_ms), "--settle", "0s",
                      "--lease", "5s", "--json"],
                     timeout=120)
    assert audited.returncode == 0, audited.stdout[-2000:] + audited.stderr
    assert json.loads(audited.stdout)["totals"]["admitted"] == totals["admitted"]
    listed = run_ql(["run", "list", "--database-url", runtime,
                     "--trigger", "t00", "--json", "--limit", "10000"],
                    check=True, timeout=60)
    assert sorted(r["scheduled_for_ms"] for r in json.loads(listed.stdout)) == sorted(
        int(r["scheduled_for_ms"]) for r in runs if r["trigger_id"] == "t00")
