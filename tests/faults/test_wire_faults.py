"""Faults on the wire between a replica and PostgreSQL, through our protocol-aware proxy.

F8: the COMMIT reply is dropped after the server committed (the replica must resolve the
outcome from durable facts and never retry); F9: the connection is closed right after a
successful COMMIT reply; F12: a link that stops passing bytes for a while, repeatedly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from testkit.pgproxy import PgProxy, ProxyMode
from tests.faults.conftest import LEASE_MS, FaultBed, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def proxy(bed: FaultBed) -> Iterator[PgProxy]:
    with PgProxy(bed.db.server.host, bed.db.server.port) as running:
        yield running


def through(proxy: PgProxy, bed: FaultBed) -> str:
    return proxy.route(bed.db.url("ql_runtime"), sslmode="disable", gssencmode="disable")


def in_doubt(replica: Any) -> list[dict[str, Any]]:
    return [e for e in replica.events() if e.get("in_doubt")]


def admitted(replica: Any) -> int:
    return sum(1 for e in replica.events() if e.get("event") == "admitted")


def others_unknown(replica: Any) -> int:
    """Transactions other than admissions whose COMMIT outcome the replica could not know."""
    return sum(1 for e in replica.events()
               if e.get("event") == "error" and e.get("code") == "QL_OUTCOME_UNKNOWN")


def test_f8_a_lost_commit_reply_is_resolved_not_retried(bed: FaultBed, proxy: PgProxy) -> None:
    bed.publish("t1")
    start = bed.now()
    a = bed.replica("a", url=through(proxy, bed)).start()
    a.wait_ready()
    wait_for(lambda: bed.rows("SELECT 1 FROM qinglong.runs"), "a first admission", 20)
    resolved: list[dict[str, Any]] = []
    for dropped in (1, 2, 3):
        # a admitting (again): past the retention pass every (re-)activation starts with
        so_far = admitted(a)
        wait_for(lambda n=so_far: admitted(a) > n, "a to admit an occurrence", 20)  # type: ignore[misc]
        proxy.arm(ProxyMode.DROP_COMMIT, count=1, application_name="ql-control:a")
        wait_for(lambda n=dropped: proxy.fired.get("drop_commit", 0) >= n,  # type: ignore[misc]
                 "a COMMIT reply to be dropped", 20)
        # The reconciler's retention pass shares the replica's connections: when the reply
        # dropped was its COMMIT (reported as an error, not an admission), drop the next.
        outcome = wait_for(lambda n=dropped: in_doubt(a) or (others_unknown(a) >= n and ["other"]),  # type: ignore[misc]
                           "a to resolve the in-doubt commit from the database", 20)
        if outcome != ["other"]:
            resolved = outcome
            break
        wait_for(lambda: a.readyz() == 200, "a to re-activate after losing its connection", 20)
    assert resolved, "three dropped COMMIT replies and none was an admission's"
    assert resolved[0]["event"] == "admitted"  # the server had committed: found, reported as such
    runs = bed.run_for("t1", resolved[0]["scheduled_for_ms"])
    assert [r["id"] for r in runs] == [resolved[0]["run_id"]]  # once, and nothing retried
    wait_for(lambda: a.readyz() == 200, "a to re-activate after losing its connection", 20)
    so_far = admitted(a)
    wait_for(lambda: admitted(a) > so_far, "a to admit again after re-activating", 20)
    assert bed.stop_all() == [0]
    report = bed.assert_exactly_once(start)
    assert report.ledger is not None and report.ledger.acknowledged > 0


def test_f9_the_connection_closed_right_after_a_successful_commit(bed: FaultBed, proxy: PgProxy) -> None:
    bed.publish("t1")
    start = bed.now()
    a = bed.replica("a", url=through(proxy, bed)).start()
    a.wait_ready()
    wait_for(lambda: bed.rows("SELECT 1 FROM qinglong.runs"), "a first admission", 20)
    proxy.arm(ProxyMode.CLOSE_AFTER_COMMIT, count=1, application_name="ql-control:a")
    wait_for(lambda: proxy.fired.get("close_after_commit", 0) >= 1, "a connection closed after COMMIT", 20)
    wait_for(lambda: any(e.get("state") == "unavailable" for e in a.events()), "a to notice", 20)
    wait_for(lambda: a.readyz() == 200, "a to re-activate", 20)
    so_far = admitted(a)
    wait_for(lambda: admitted(a) > so_far, "a to admit again after re-activating", 20)
    assert bed.stop_all() == [0]
    bed.assert_exactly_once(start)


def test_f12_a_link_that_stalls_and_recovers_repeatedly(bed: FaultBed, proxy: PgProxy) -> None:
    for i in range(3):
        bed.publish(f"t{i}")
    a = bed.replica("a", url=through(proxy, bed)).start()
    b = bed.replica("b").start()
    a.wait_ready()
    b.wait_ready()
    start = bed.now()  # the lag bound judges the stalls, not how slowly the replicas started
    for stall in range(1, 5):
        held, carried = proxy.fired.get("blackhole", 0), admitted(b)
        proxy.arm(ProxyMode.BLACKHOLE, application_name="ql-control:a")
        # stalled until a's traffic is held and b has admitted an occurrence meanwhile
        wait_for(lambda h=held, c=carried: proxy.fired.get("blackhole", 0) > h  # type: ignore[misc]
                 and admitted(b) > c, f"stall {stall}: a's traffic held while b admits", 20)
        flowing_at = bed.now()  # (nothing of a's reached the server since the arm)
        proxy.disarm()
        wait_for(lambda t=flowing_at: any(s["state_change_ms"] > t  # type: ignore[misc]
                                          for s in bed.backends("a")),
                 f"stall {stall}: a's statements to reach the server again", 20)
    assert proxy.fired.get("blackhole", 0) >= 4
    assert bed.stop_all() == [0, 0]  # (settles: every occurrence a held is admitted first)
    report = bed.assert_exactly_once(start)
    assert max(lag for t in report.triggers for lag in t.lags_ms) <= LEASE_MS + 5_000
