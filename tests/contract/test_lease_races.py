"""Races between a worker renewing its leases and a reconciler withdrawing them, on
PostgreSQL (SQLite runs one writer at a time, so these interleavings cannot happen there).

A renewal is held open in a second transaction (the statements the store runs, not yet
committed) while a rescue runs, so the interleaving is forced, not hoped for.
"""

from __future__ import annotations

import json
import threading
import time

import psycopg
import pytest
from psycopg.rows import dict_row

from qinglong.storage.ports import LeaseRescueParams
from qinglong.storage.postgres.connection import QUERIES
from tests.contract.conftest import PgBackend
from tests.contract.test_leases import acquire, run_to_running
from tests.contract.test_runs import setup_definitions


@pytest.fixture
def pg(pg_backend: PgBackend) -> PgBackend:
    """Three queued Runs on a PostgreSQL backend."""
    setup_definitions(pg_backend)
    base = pg_backend.now_ms() // 1000 * 1000
    for project, trigger, seconds_before in (("demo", "t1", 9), ("demo", "t2", 6),
                                             ("other", "t1", 3)):
        pg_backend.admit(project, trigger, base - seconds_before * 1000)
    return pg_backend


def _renewal_held_open(backend: PgBackend, fences: list[dict[str, object]], owner: str,
                       lease_ms: int) -> psycopg.Connection[dict[str, object]]:
    conn = psycopg.connect(backend.db.url("ql_runtime"), row_factory=dict_row)
    conn.execute("SET search_path TO qinglong")
    held = json.dumps(fences)
    conn.execute(QUERIES["lease_renew_lock"], {"fences": held})
    renewed = conn.execute(QUERIES["lease_renew"],
                           {"fences": held, "owner": owner, "lease_ms": lease_ms}).fetchall()
    assert len(renewed) == len(fences)
    return conn


def test_a_rescue_never_loses_a_lease_whose_renewal_commits_meanwhile(pg: PgBackend) -> None:
    [lease] = acquire(pg, limit=1, lease_ms=1_000)
    run_to_running(pg, lease.fence)
    fence = {"attempt_id": lease.fence.attempt_id, "generation": lease.fence.generation,
             "digest": lease.fence.digest}
    renewing = _renewal_held_open(pg, [fence], "w1", 60_000)
    try:
        time.sleep(1.2)  # the committed lease (1 s) has now expired
        rescued: list[object] = []
        rescuer = threading.Thread(target=lambda: rescued.extend(
            pg.lifecycle.lease_rescue(LeaseRescueParams(grace_ms=0))))
        rescuer.start()
        rescuer.join(timeout=0.5)
        blocked = rescuer.is_alive()
        renewing.commit()
        rescuer.join(timeout=10)
        assert not rescuer.is_alive()
    finally:
        renewing.close()
    assert not blocked, "the rescue waited for the renewal instead of skipping its rows"
    assert rescued == []
    detail = pg.runs.run_get(lease.fence.run_id)
    assert (detail.run.status, detail.attempts[0].status) == ("running", "running")
    assert pg.lifecycle.lease_rescue(LeaseRescueParams(grace_ms=0)) == []


def test_renewals_and_rescues_lock_in_one_order(pg: PgBackend) -> None:
    """A renewal of several leases and a rescue of the same Runs never deadlock: both lock
    Runs before Attempts (the rescue skips what the renewal holds)."""
    leases = acquire(pg, limit=3, lease_ms=1_000)
    for lease in leases:
        run_to_running(pg, lease.fence)
    before = pg.db.execute("SELECT deadlocks FROM pg_stat_database "
                           "WHERE datname = current_database()")[0]["deadlocks"]
    fences = [{"attempt_id": lease.fence.attempt_id, "generation": lease.fence.generation,
               "digest": lease.fence.digest} for lease in reversed(leases)]
    renewing = _renewal_held_open(pg, fences[:1], "w1", 60_000)
    try:
        time.sleep(1.2)
        rescued = pg.lifecycle.lease_rescue(LeaseRescueParams(grace_ms=0))
    finally:
        renewing.commit()
        renewing.close()
    # the one being renewed was skipped; the other two expired unrenewed and are lost
    assert {r.run_id for r in rescued} == {lease.fence.run_id for lease in leases[:2]}
    after = pg.db.execute("SELECT deadlocks FROM pg_stat_database "
                          "WHERE datname = current_database()")[0]["deadlocks"]
    assert after == before
