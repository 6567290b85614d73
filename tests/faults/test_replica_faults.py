"""Replica processes killed, stopped, frozen and cut off from their backends at the worst
moments; each case ends with the audit proving every occurrence was admitted exactly once.

Faults (numbering from docs/guarantees.md): F2 SIGKILL inside the admission transaction;
F3 SIGKILL between claim and commit; F4 SIGSTOP longer than the lease; F5 a frozen replica
holding a row lock, ended by the idle-in-transaction timeout; F6 pg_terminate_backend inside
the transaction; F7 pg_terminate_backend of idle pooled connections; F19 lock_timeout and
statement_timeout at commit; F20 a trigger republished or disabled while a claim is held.
"""

from __future__ import annotations

import signal

import pytest

from tests.faults.conftest import GRACE_MS, LEASE_MS, FaultBed, wait_for

pytestmark = pytest.mark.slow

# A replica that holds each admission transaction open HOLD_MS before its COMMIT, on a
# HOLD_LEASE_MS lease: that lease puts its idle-in-transaction timeout (lease / 2) at 3 s,
# above the hold, so the transaction is still open when the test strikes.
HOLD_MS = 2_000
HOLD_LEASE_MS = 6_000


def make_due(bed: FaultBed) -> int:
    """Point the per-second trigger's cursor at the next whole second (a nominal occurrence
    after the publish time), so the next claim is an admission; the audit starts there."""
    due = (bed.now() // 1000 + 1) * 1000
    bed.rows("UPDATE qinglong.trigger_schedules SET next_fire_at_ms = %s, "
             "state_version = state_version + 1", [due])
    return due


def test_f2_sigkill_inside_the_admission_transaction(bed: FaultBed) -> None:
    bed.publish("t1")
    due = make_due(bed)
    a = bed.replica("a", "--hold-in-tx-ms", str(HOLD_MS), lease_ms=HOLD_LEASE_MS).start()
    a.wait_ready()
    wait_for(lambda: bed.holding_transaction("a"), "a to sit inside its admission transaction")
    a.kill()  # at once: a second replica starting first could outlast the hold
    killed_at = bed.now()
    b = bed.replica("b").start()
    b.wait_ready()
    wait_for(lambda: bed.holding_transaction("a") is None and not bed.backends("a"), "a's backend to go", 5)
    runs = wait_for(lambda: bed.run_for("t1", due), "the takeover admission", 20)
    assert [r["owner"] for r in runs] == ["b"]
    assert runs[0]["created_at_ms"] - killed_at <= HOLD_LEASE_MS + 2_000
    assert bed.stop_all() == [0]
    bed.assert_exactly_once(due)


def test_f3_sigkill_between_claim_and_commit(bed: FaultBed) -> None:
    bed.publish("t1")
    due = make_due(bed)
    a = bed.replica("a", "--pause-after-claim-ms", "8000").start()
    a.wait_ready()
    grant = wait_for(lambda: bed.claims_by("a"), "a to claim")[0]
    assert grant["cursor_ms"] == due  # a holds the claim on the occurrence, paused before commit
    a.kill()
    b = bed.replica("b").start()
    b.wait_ready()
    ready_at = bed.now()
    runs = wait_for(lambda: bed.run_for("t1", due), "the takeover admission", 20)
    assert [r["owner"] for r in runs] == ["b"]
    # taken over only after the dead claim's lease ended (database time), and promptly after
    # that or after b was ready, whichever came last (b may start slowly on a loaded machine)
    expires = int(grant["expires_at_ms"])
    assert expires <= runs[0]["created_at_ms"] <= max(expires, ready_at) + 3_000
    assert bed.stop_all() == [0]
    bed.assert_exactly_once(due)


def test_f4_a_replica_paused_longer_than_its_lease_is_fenced(bed: FaultBed) -> None:
    bed.publish("t1")
    start = bed.now()
    # the pause leaves the test 5 s to stop a between its claim and its commit; once
    # continued, more than the lease has passed either way
    a = bed.replica("a", "--pause-after-claim-ms", "5000").start()
    a.wait_ready()
    grant = wait_for(lambda: bed.claims_by("a"), "a to claim")[0]
    assert a.process is not None
    a.freeze()
    b = bed.replica("b").start()
    b.wait_ready()
    # a stays frozen until its claim's lease has ended by the database clock and b has
    # taken the trigger over (admitted under a later claim)
    wait_for(lambda: bed.now() > grant["expires_at_ms"] and bed.rows(
        "SELECT 1 FROM qinglong.run_events WHERE sequence = 1 AND payload ->> 'claim_owner' = 'b' "
        "AND (payload ->> 'claim_version')::bigint > %s", [grant["claim_version"]]),
        "a's lease to end and b to take the trigger over", 20)
    a.process.send_signal(signal.SIGCONT)
    wait_for(lambda: any(e.get("event") == "raced" for e in a.events()), "a to find itself fenced", 10)
    assert a.stop() == 0  # (its pause knob would otherwise slow the trigger down from here on)
    assert bed.stop_all() == [0]  # (b catches up first: stop_all settles)
    # no Run of the row carries the paused claim (its token and version: the rows one claim
    # statement takes share its token)
    claims = {(r["token"], int(r["version"])) for r in bed.rows(
        "SELECT e.payload ->> 'claim_token' AS token, e.payload ->> 'claim_version' AS version "
        "FROM qinglong.run_events e JOIN qinglong.runs r ON r.id = e.run_id "
        "WHERE e.sequence = 1 AND r.trigger_id = %s", [grant["trigger_id"]])}
    assert claims and (str(grant["claim_token"]), int(grant["claim_version"])) not in claims
    raced = [e for e in a.events() if e.get("event") == "raced"]
    assert raced and raced[0]["claim_version"] == grant["claim_version"]
    bed.assert_exactly_once(start)


def test_f5_a_frozen_holder_is_cut_off_by_the_idle_in_transaction_timeout(bed: FaultBed) -> None:
    bed.publish("t1")
    due = make_due(bed)
    a = bed.replica("a", "--hold-in-tx-ms", "6000").start()
    a.wait_ready()
    holder = wait_for(lambda: bed.holding_transaction("a"), "a inside its admission transaction")
    assert a.process is not None
    a.freeze()
    wait_for(lambda: all(b["pid"] != holder["pid"] for b in bed.backends("a")),
             "the server to end the frozen backend", 20)
    # The server itself ended it, for its timeout, and less than a lease after the backend
    # went idle inside the transaction: the row lock ends before the lease. Judged on the
    # server's clock and log, not on how fast this test's polls ran on a loaded machine.
    ended_ms = wait_for(lambda: bed.server_ended(holder["pid"]), "the server's log of the timeout", 10)
    assert 0 <= ended_ms - holder["state_change_ms"] < LEASE_MS
    b = bed.replica("b").start()
    b.wait_ready()
    runs = wait_for(lambda: bed.run_for("t1", due), "b to take the occurrence over", 20)
    assert [r["owner"] for r in runs] == ["b"]
    a.process.send_signal(signal.SIGCONT)
    wait_for(lambda: any(e.get("state") == "unavailable" for e in a.events()),
             "a to notice its transaction was ended", 20)
    wait_for(lambda: a.readyz() == 200, "a to come back through a fresh activation", 20)
    assert a.process.poll() is None  # it did not crash on 25P03
    assert bed.stop_all() == [0, 0]
    states = [e["state"] for e in a.events() if e.get("event") == "state"]
    assert "unavailable" in states and states.count("ready") >= 2
    bed.assert_exactly_once(due)


def test_f6_terminating_the_backend_inside_the_transaction(bed: FaultBed) -> None:
    bed.publish("t1")
    due = make_due(bed)
    a = bed.replica("a", "--hold-in-tx-ms", str(HOLD_MS), lease_ms=HOLD_LEASE_MS).start()
    a.wait_ready()
    holder = wait_for(lambda: bed.holding_transaction("a"), "a inside its admission transaction")
    bed.rows("SELECT pg_terminate_backend(%s)", [holder["pid"]])
    runs = wait_for(lambda: bed.run_for("t1", due), "the occurrence to be admitted after all", 20)
    assert len(runs) == 1
    # The hold makes this single replica slower than the trigger, so it never catches up
    # (no settling: it would only wait out its bound): judge the one occurrence.
    assert bed.stop_all(settle=False) == [0]
    bed.assert_exactly_once(due, due + 2_000)


def test_f7_terminating_idle_pooled_connections_repeatedly(bed: FaultBed) -> None:
    for i in range(5):
        bed.publish(f"t{i}")
    start = bed.now()
    replicas = [bed.replica(name).start() for name in ("a", "b")]
    for replica in replicas:
        replica.wait_ready()
    killed: set[int] = set()

    def connected(owner: str) -> bool:
        """The replica has a session again, not one of those terminated (it may linger in
        pg_stat_activity a moment after the kill)."""
        return any(b["pid"] not in killed for b in bed.backends(owner))

    for _ in range(6):
        # each kill comes once both replicas are connected again: every round hits both
        wait_for(lambda: connected("a") and connected("b"), "a and b connected again", 20)
        killed.update(r["pid"] for r in bed.rows(
            "SELECT pid, pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE datname = %s "
            "AND application_name LIKE 'ql-control:%%'", [bed.db.name]) if r["ok"])
        last_kill = bed.now()
    terminated = len(killed)
    assert terminated >= 6
    for replica in replicas:
        wait_for(lambda r=replica: r.readyz() == 200, f"{replica.owner} ready again", 20)
    assert bed.stop_all() == [0, 0]  # (settles: every claim a kill left behind is taken over)
    bed.assert_exactly_once(start)
    # A replica whose re-activation is cut off by the next kill (a slow machine) may stay
    # down for the whole storm; once the kills stop, every occurrence is admitted within a
    # lease and 5 s of its time, or of the last kill if it fell due during the storm.
    late = [(r["trigger_id"], r["scheduled_for_ms"], r["created_at_ms"] - max(r["scheduled_for_ms"], last_kill))
            for r in bed.rows("SELECT trigger_id, scheduled_for_ms, created_at_ms FROM qinglong.runs")]
    assert late and max(lag for _, _, lag in late) <= LEASE_MS + 5_000, sorted(late, key=lambda x: x[2])[-3:]


def test_f19_lock_and_statement_timeouts_on_claim_and_commit_are_survived(bed: FaultBed) -> None:
    import psycopg

    bed.publish("t1")
    start = bed.now()
    a = bed.replica("a", "--pause-after-claim-ms", "1000").start()
    a.wait_ready()
    server = bed.db.server.url("postgres", bed.db.name)

    def errors(*words: str) -> int:
        """Transient-error events whose message holds every word (action and SQLSTATE)."""
        return sum(1 for e in a.events() if e.get("event") == "error"
                   and e.get("code") == "QL_STORAGE_TRANSIENT"
                   and all(w in str(e.get("message")) for w in words))

    # 1. statement_timeout (57014) at commit: a slow insert.
    bed.rows("CREATE FUNCTION qinglong.slow() RETURNS trigger LANGUAGE plpgsql AS "
             "$$ BEGIN PERFORM pg_sleep(3); RETURN NEW; END $$")
    bed.rows("CREATE TRIGGER slow BEFORE INSERT ON qinglong.runs FOR EACH ROW EXECUTE FUNCTION qinglong.slow()")
    wait_for(lambda: errors("admit occurrence", "57014") >= 1, "a statement timeout at commit", 15)
    bed.rows("DROP TRIGGER slow ON qinglong.runs")
    # 2. statement_timeout (57014) on the claim: a slow schedule update.
    bed.rows("CREATE TRIGGER slow BEFORE UPDATE ON qinglong.trigger_schedules "
             "FOR EACH ROW EXECUTE FUNCTION qinglong.slow()")
    wait_for(lambda: errors("claim schedules", "57014") >= 1, "a statement timeout on the claim", 15)
    bed.rows("DROP TRIGGER slow ON qinglong.trigger_schedules")
    # 3. lock_timeout (55P03) on the claim: the whole schedule table locked.
    with psycopg.connect(server) as conn:
        conn.execute("LOCK TABLE qinglong.trigger_schedules IN ACCESS EXCLUSIVE MODE")
        wait_for(lambda: errors("claim schedules", "55P03") >= 1, "a lock timeout on the claim", 10)
    # 4. lock_timeout (55P03) at commit: the claimed row locked between claim and commit;
    # the admission retries it before COMMIT (counted by SQLSTATE), and reports it once its
    # attempts are spent -- or, sooner, once the claim's lease has run out by the database
    # clock (a 3 s lease outlasts only two of the 1 s lock waits after a's 1 s pause): then it
    # is raced, claim_expired, and nothing is retried past the lease. Either way the
    # occurrence is claimed and admitted again once the lock is gone.
    # (connected first: only the lock itself is left to land inside a's 1 s pause)
    def retried(state: str) -> float:
        return sum(v for k, v in a.metric("ql_admission_retries_total").items() if state in k)

    def expired() -> int:
        return sum(1 for e in a.events()
                   if e.get("event") == "raced" and e.get("reason") == "claim_expired")

    retried_before, expired_before = retried("55P03"), expired()
    with psycopg.connect(server) as conn:
        claims = len(bed.claims_by("a"))
        wait_for(lambda: len(bed.claims_by("a")) > claims, "a to hold a claim", 10, 0.01)
        conn.execute("SELECT 1 FROM qinglong.trigger_schedules FOR UPDATE")
        wait_for(lambda: retried("55P03") > retried_before and (
                     errors("admit occurrence", "55P03") >= 1 or expired() > expired_before),
                 "a lock timeout at commit, retried, then reported", 15)
    released = bed.now()
    wait_for(lambda: any(e.get("event") == "admitted" and e["at_ms"] > released for e in a.events()),
             "a admitting again after every timeout", LEASE_MS / 1000 + 15)
    assert a.process is not None and a.process.poll() is None  # never fatal
    # The 1 s pause per admission left a far behind a once-a-second trigger; a stop ends its
    # catch-up with the claim in hand, and a second replica delivers the backlog within grace.
    assert a.stop() == 0
    b = bed.replica("b").start()
    b.wait_ready()
    assert bed.stop_all() == [0]
    report = bed.assert_exactly_once(start)
    t1 = report.triggers[0]
    assert t1.admitted > 8 and max(t1.lags_ms) < GRACE_MS


@pytest.mark.parametrize("change", ["republish", "disable"])
def test_f20_a_trigger_changed_while_its_claim_is_held(bed: FaultBed, change: str) -> None:
    from qinglong.storage.definitions.params import TriggerPublishParams

    bed.publish("t1")
    start = bed.now()
    # a 2.5 s pause inside a 3 s lease: the change must land while a holds its claim
    a = bed.replica("a", "--pause-after-claim-ms", "2500").start()
    a.wait_ready()
    wait_for(lambda: bed.rows("SELECT 1 FROM qinglong.runs"), "a first admission", 20)
    held = len(bed.claims_by("a"))
    wait_for(lambda: len(bed.claims_by("a")) > held, "a to hold its next claim")
    changed_at = bed.now()
    if change == "republish":
        bed.admin.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="t1",
                                                       expression="*/2 * * * * *"))
    else:
        bed.admin.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="t1", enabled=False))
    wait_for(lambda: any(e.get("event") == "raced" for e in a.events()), "a to find its claim raced", 15)
    # the pause per claim leaves a behind the trigger: a second replica delivers the backlog
    assert a.stop() == 0
    b = bed.replica("b").start()
    b.wait_ready()
    if change == "republish":
        wait_for(lambda: any(e.get("event") == "admitted" for e in b.events()), "b to catch up", 15)
    assert bed.stop_all() == [0]  # (settles: b ends its catch-up first)
    late = bed.rows("SELECT count(*) AS n FROM qinglong.runs WHERE trigger_revision = 1 "
                    "AND created_at_ms > %s", [changed_at])
    assert late[0]["n"] == 0  # nothing committed for the old revision after the change
    assert any(e.get("event") == "raced" for e in a.events())
    bed.assert_exactly_once(start)
