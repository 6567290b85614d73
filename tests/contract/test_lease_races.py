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

from qinglong.storage.postgres.connection import QUERIES
from qinglong.storage.runs.params import AttemptLease, LeaseRescueParams
from tests.contract.conftest import PgBackend
from tests.contract.test_leases import acquire, run_to_running
from tests.contract.test_runs import setup_definitions

# How far ahead of "now" the committed leases are cut to expire, just before the renewal is
# opened: the renewal's two statements must land before that, and the test then waits it out.
EXPIRY_WINDOW_MS = 3_000


@pytest.fixture
def pg(pg_backend: PgBackend) -> PgBackend:
    """Three queued Runs on a PostgreSQL backend."""
    setup_definitions(pg_backend)
    base = pg_backend.now_ms() // 1000 * 1000
    for project, trigger, seconds_before in (("demo", "t1", 9), ("demo", "t2", 6),
                                             ("other", "t1", 3)):
        pg_backend.admit(project, trigger, base - seconds_before * 1000)
    return pg_backend


def _fence(lease: AttemptLease) -> dict[str, object]:
    return {"attempt_id": lease.fence.attempt_id, "generation": lease.fence.generation,
            "digest": lease.fence.digest}


def _renewal_held_open(backend: PgBackend, leases: list[AttemptLease],
                       fences: list[dict[str, object]], owner: str,
                       lease_ms: int) -> psycopg.Connection[dict[str, object]]:
    """Cut the committed ``leases`` to expire EXPIRY_WINDOW_MS from now, renew ``fences`` in a
    transaction left open, and wait (on the database clock) until the committed leases have
    expired. The leases are granted for LEASE_MS, so the steps before this take no time
    budget; only the two statements of the renewal must land within the window."""
    conn = psycopg.connect(backend.db.url("ql_runtime"), row_factory=dict_row)
    try:
        conn.execute("SET search_path TO qinglong")
        # held open across the wait and the rescue: more than the role's 10 s on a slow machine
        conn.execute("SET idle_in_transaction_session_timeout = '60s'")
        conn.commit()
        held = json.dumps(fences)
        expiries = backend.db.execute(
            "UPDATE run_attempts SET lease_expires_at_ms = "
            "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint + %s "
            "WHERE id = ANY(%s) RETURNING lease_expires_at_ms",
            [EXPIRY_WINDOW_MS, [lease.fence.attempt_id for lease in leases]])
        assert len(expiries) == len(leases)
        conn.execute(QUERIES["lease_renew_lock"], {"fences": held})
        renewed = conn.execute(QUERIES["lease_renew"],
                               {"fences": held, "owner": owner, "lease_ms": lease_ms}).fetchall()
        assert len(renewed) == len(fences)
        expired_at = max(int(row["lease_expires_at_ms"]) for row in expiries)  # type: ignore[call-overload]
        while (left := expired_at - backend.now_ms()) >= 0:
            time.sleep(left / 1000 + 0.01)
    except BaseException:
        conn.close()
        raise
    return conn


def test_a_rescue_never_loses_a_lease_whose_renewal_commits_meanwhile(pg: PgBackend) -> None:
    [lease] = acquire(pg, limit=1)
    run_to_running(pg, lease.fence)
    renewing = _renewal_held_open(pg, [lease], [_fence(lease)], "w1", 60_000)
    try:  # the committed lease has now expired; the renewal is not committed yet
        rescued: list[object] = []
        rescuer = threading.Thread(target=lambda: rescued.extend(
            pg.lifecycle.lease_rescue(LeaseRescueParams(grace_ms=0))))
        rescuer.start()
        # a rescue that skips the held rows ends before the commit; one that waits for them
        # is still waiting after 10 s (its statement timeout is 15 s)
        rescuer.join(timeout=10)
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
    leases = acquire(pg, limit=3)
    for lease in leases:
        run_to_running(pg, lease.fence)
    before = pg.db.execute("SELECT deadlocks FROM pg_stat_database "
                           "WHERE datname = current_database()")[0]["deadlocks"]
    fences = [_fence(lease) for lease in reversed(leases)]
    renewing = _renewal_held_open(pg, leases, fences[:1], "w1", 60_000)
    try:  # all three committed leases have expired; one is being renewed
        rescued = pg.lifecycle.lease_rescue(LeaseRescueParams(grace_ms=0))
    finally:
        renewing.commit()
        renewing.close()
    # the one being renewed was skipped; the other two expired unrenewed and are lost
    assert {r.run_id for r in rescued} == {lease.fence.run_id for lease in leases[:2]}
    after = pg.db.execute("SELECT deadlocks FROM pg_stat_database "
                          "WHERE datname = current_database()")[0]["deadlocks"]
    assert after == before
