"""Claim and commit on real PostgreSQL: fences, takeover, eligibility, atomicity, retries."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from qinglong.domain.admission import AdmissionIds
from qinglong.domain.decision import Disposition
from qinglong.domain.schedule import ScheduleClaim
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import OutcomeUnknown, RecordCorrupt, StorageError
from qinglong.scheduler.coordinator import Coordinator
from qinglong.storage.admission import ScheduleStore
from qinglong.storage.admission.params import (
    ClaimCommitParams,
    CommitOutcome,
    CommitResult,
    ScheduleClaimParams,
)
from qinglong.storage.definitions.params import TaskPublishParams, TriggerPublishParams
from tests.integration.conftest import Cluster
from tests.support.held_commits import HeldCommits as SharedHeldCommits


def new_ids() -> AdmissionIds:
    return AdmissionIds(run_id=str(uuid.uuid4()), attempt_id=str(uuid.uuid4()),
                        created_event_id=str(uuid.uuid4()), queued_event_id=str(uuid.uuid4()))


def claim_one(store: ScheduleStore, owner: str = "r1", lease_ms: int = 30_000) -> ScheduleClaim | None:
    claims = store.schedule_claim(ScheduleClaimParams(owner=owner, lease_ms=lease_ms, limit=1))
    assert all(isinstance(c, ScheduleClaim) for c in claims)
    return claims[0] if claims else None  # type: ignore[return-value]


def commit(store: ScheduleStore, claim: ScheduleClaim, grace_ms: int = 30_000) -> CommitResult:
    decision = claim.decide(grace_ms=grace_ms)
    ids = new_ids() if decision.disposition is Disposition.ADMIT else None
    return store.schedule_commit(ClaimCommitParams(claim=claim, decision=decision, ids=ids))


def shape_of_runs(cluster: Cluster) -> list[tuple[int, int, int]]:
    rows = cluster.db.execute(
        "SELECT r.scheduled_for_ms, "
        "(SELECT count(*) FROM run_attempts a WHERE a.run_id = r.id) AS attempts, "
        "(SELECT count(*) FROM run_events e WHERE e.run_id = r.id) AS events "
        "FROM runs r ORDER BY 1")
    return [(int(r["scheduled_for_ms"]), int(r["attempts"]), int(r["events"])) for r in rows]  # type: ignore[call-overload]


def test_claim_writes_the_fence_from_database_time(cluster: Cluster) -> None:
    cluster.publish("t1")
    before = cluster.db_now()
    claim = claim_one(cluster.store(), lease_ms=7_000)
    after = cluster.db_now()
    assert claim is not None
    fence = claim.fence
    assert fence.owner == "r1" and fence.version == 1 and len(fence.token) == 36
    assert before <= fence.acquired_at_ms <= after
    assert fence.expires_at_ms - fence.acquired_at_ms == 7_000
    row = cluster.db.execute("SELECT * FROM trigger_schedules")[0]
    assert (row["claim_owner"], str(row["claim_token"]), row["claim_version"], row["updated_at_ms"]) == (
        "r1", fence.token, 1, fence.acquired_at_ms)
    [grant] = cluster.db.execute("SELECT * FROM trigger_schedule_claims")
    assert (grant["claim_version"], str(grant["claim_token"]), grant["cursor_ms"]) == (1, fence.token, None)
    assert claim_one(cluster.store("other"), owner="r2") is None  # a live claim hides the row


def test_one_occurrence_gives_one_run_one_attempt_two_events(cluster: Cluster) -> None:
    cluster.publish("t1", cron="0 0 1 1 *")  # yearly: nothing due by itself
    store = cluster.store()
    claim = claim_one(store)
    assert claim is not None and commit(store, claim).disposition is Disposition.INITIALIZE
    due = cluster.make_due("t1")
    claim = claim_one(store)
    assert claim is not None and claim.candidate.next_fire_at_ms == due
    result = commit(store, claim)
    assert result.outcome is CommitOutcome.ADMITTED and not result.in_doubt
    assert shape_of_runs(cluster) == [(due, 1, 2)]
    detail = cluster.runs.run_get(result.run_id or "")
    assert detail.run.status == "queued" and detail.attempts[0].executor_type == "remote_worker"
    assert detail.attempts[0].status == "claimed"
    created = detail.events[0].payload
    assert (created["claim_owner"], created["claim_version"], created["claim_token"]) == (
        "r1", claim.fence.version, claim.fence.token)
    row = cluster.db.execute("SELECT * FROM trigger_schedules")[0]
    assert row["claim_owner"] is None and row["claim_token"] is None
    assert row["last_scheduled_at_ms"] == due and row["claim_version"] == claim.fence.version
    assert row["next_fire_at_ms"] > due


def test_concurrent_coordinators_admit_each_occurrence_exactly_once(cluster: Cluster) -> None:
    for i in range(10):
        cluster.publish(f"t{i}")
    coordinators = [
        Coordinator(cluster.store(f"r{n}"), owner=f"r{n}", lease_ms=5_000, budget=8, batch=2)
        for n in range(3)
    ]
    stop = threading.Event()
    admitted = {c.owner: 0 for c in coordinators}
    errors: list[BaseException] = []

    def loop(coordinator: Coordinator) -> None:
        while not stop.is_set():
            try:
                admitted[coordinator.owner] += coordinator.run_cycle().admitted
            except BaseException as exc:  # surfaced below
                errors.append(exc)
                return
            time.sleep(0.05)

    def enough() -> bool:
        """Three occurrences of each trigger admitted, by at least two of the coordinators."""
        counts = cluster.db.execute("SELECT count(*) AS n FROM runs GROUP BY trigger_id")
        return (len(counts) == 10 and min(int(c["n"]) for c in counts) >= 3  # type: ignore[call-overload]
                and sum(1 for n in admitted.values() if n > 0) >= 2)

    threads = [threading.Thread(target=loop, args=(c,)) for c in coordinators]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 30
    while not errors and not enough() and time.monotonic() < deadline:
        time.sleep(0.1)
    stop.set()
    for t in threads:
        t.join(10)
    assert errors == []
    # this test's database only: the system server is shared by the suite's workers, and
    # another test there may name its sessions r0, r1...
    backends = cluster.db.execute(
        "SELECT count(DISTINCT pid) AS n FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name IN ('r0', 'r1', 'r2')")
    assert backends[0]["n"] == 3  # independent connections, distinct backend PIDs
    rows = cluster.db.execute(
        "SELECT trigger_id, scheduled_for_ms, count(*) AS n FROM runs GROUP BY 1, 2 HAVING count(*) > 1")
    assert rows == []
    per_trigger = cluster.db.execute(
        "SELECT trigger_id, array_agg(scheduled_for_ms ORDER BY scheduled_for_ms) AS s FROM runs GROUP BY 1")
    assert len(per_trigger) == 10
    for row in per_trigger:
        s = row["s"]
        assert s == list(range(s[0], s[-1] + 1, 1000)), f"gap in {row['trigger_id']}"
        assert len(s) >= 3, f"{row['trigger_id']}: {s}"
    assert all(shape[1:] == (1, 2) for shape in shape_of_runs(cluster))
    assert sum(1 for n in admitted.values() if n > 0) >= 2, f"SKIP LOCKED did not spread rows: {admitted}"


def test_a_stop_request_ends_a_catching_up_cycle_after_the_claims_in_hand(cluster: Cluster) -> None:
    cluster.publish("t1")
    cluster.make_due("t1", cluster.db_now() // 1000 * 1000 - 10_000)  # ten seconds behind
    coordinator = Coordinator(cluster.store(), owner="r1", lease_ms=5_000, budget=64, batch=1)
    asked = 0

    def stop_requested() -> bool:
        nonlocal asked
        asked += 1
        return asked > 2  # a stop arrives while the second claim is in hand

    report = coordinator.run_cycle(stop_requested)
    assert (report.claimed, report.admitted) == (2, 2)  # both claims in hand were committed
    assert cluster.count("trigger_schedules", "claim_owner IS NOT NULL") == 0  # nothing left held
    assert coordinator.run_cycle().admitted >= 9  # left alone, the same cycle catches up in full


def test_an_expired_claim_is_taken_over_and_the_old_holder_is_fenced(cluster: Cluster) -> None:
    cluster.publish("t1", cron="0 0 1 1 *")
    a, b = cluster.store("a"), cluster.store("b")
    # 3 s: b's first claim (which also opens its connection) must still find the lease live
    first = claim_one(a, owner="a", lease_ms=3_000)
    assert first is not None
    assert claim_one(b, owner="b") is None  # live claim
    deadline = time.monotonic() + 10
    second = None
    while second is None and time.monotonic() < deadline:  # wait for expiry in database time
        time.sleep(0.1)
        second = claim_one(b, owner="b")
    assert second is not None and second.fence.version == first.fence.version + 1
    assert second.fence.acquired_at_ms >= first.fence.expires_at_ms
    assert commit(b, second).outcome is CommitOutcome.ADVANCED
    after_takeover = cluster.db.execute("SELECT * FROM trigger_schedules")[0]
    stale = commit(a, first)
    # A single commit is a batch of one: its claim is checked against the database clock
    # before its row is written, so the old holder learns that its lease ran out.
    assert stale.outcome is CommitOutcome.RACED and stale.reason == "claim_expired"
    assert cluster.db.execute("SELECT * FROM trigger_schedules")[0] == after_takeover


def test_own_claim_expired_by_database_time_races(cluster: Cluster) -> None:
    cluster.publish("t1", cron="0 0 1 1 *")
    store = cluster.store()
    claim = claim_one(store, lease_ms=1_000)
    assert claim is not None
    deadline = time.monotonic() + 30
    while cluster.db_now() < claim.fence.expires_at_ms:  # expired by the database's clock
        assert time.monotonic() < deadline, "the database clock did not pass the lease"
        time.sleep(0.05)
    assert commit(store, claim).outcome is CommitOutcome.RACED
    assert cluster.db.execute("SELECT next_fire_at_ms FROM trigger_schedules")[0]["next_fire_at_ms"] is None


def test_a_republished_trigger_fences_the_claim_in_flight(cluster: Cluster) -> None:
    cluster.publish("t1")
    store = cluster.store()
    claim = claim_one(store)
    assert claim is not None
    cluster.admin.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="t1",
                                                       expression="*/2 * * * * *"))
    row = cluster.db.execute("SELECT * FROM trigger_schedules")[0]
    assert row["claim_token"] is None and row["claim_version"] == claim.fence.version + 1
    result = commit(store, claim)
    # the claim is still live by the clock: its row's fence (the write's condition) refuses it
    assert result.outcome is CommitOutcome.RACED and result.reason == "claim_superseded"
    assert cluster.count("runs") == 0


@pytest.mark.parametrize("change", ["disable", "archive", "task-moved", "task-disabled"])
def test_ineligible_triggers_are_not_claimable_and_fence_claims(cluster: Cluster, change: str) -> None:
    cluster.publish("t1")
    cluster.publish("t2")
    store = cluster.store()
    held = claim_one(store)  # claims t1 (ordering by project, trigger for NULL cursors)
    assert held is not None and held.candidate.trigger_id == "t1"
    if change == "disable":
        cluster.admin.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="t2", enabled=False))
        cluster.admin.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="t1", enabled=False))
    elif change == "archive":
        cluster.admin.project_archive("demo")
    else:
        cluster.admin.task_publish(TaskPublishParams(
            project_id="demo", task_id="hello", name="Hello", repin_triggers=False,
            enabled=change == "task-moved", spec=CommandSpec(command=ShellCommand(command="echo v2"))))
    assert claim_one(cluster.store("r2"), owner="r2") is None
    assert commit(store, held).outcome is CommitOutcome.RACED
    assert cluster.count("runs") == 0


def test_a_corrupt_execution_revision_makes_commit_unavailable_and_writes_nothing(cluster: Cluster) -> None:
    cluster.publish("t1")
    due = cluster.make_due("t1")
    store = cluster.store()
    claim = claim_one(store)
    assert claim is not None and claim.decide(grace_ms=30_000).disposition is Disposition.ADMIT
    cluster.db.execute("UPDATE task_execution_revisions SET plan_json = "
                       "jsonb_set(plan_json, '{command,command}', '\"rm -rf /\"')")
    with pytest.raises(RecordCorrupt):
        commit(store, claim)
    assert cluster.count("runs") == 0 and cluster.count("run_events") == 0
    row = cluster.db.execute("SELECT * FROM trigger_schedules")[0]
    assert row["next_fire_at_ms"] == due and str(row["claim_token"]) == claim.fence.token


INJECTIONS = {
    "run": "BEFORE INSERT ON runs FOR EACH ROW",
    "attempt": "BEFORE INSERT ON run_attempts FOR EACH ROW",
    "created-event": "BEFORE INSERT ON run_events FOR EACH ROW",
    "queued-event": "BEFORE INSERT ON run_events FOR EACH ROW WHEN (NEW.type = 'run.queued')",
    "misfire-row": "BEFORE INSERT ON trigger_schedule_misfires FOR EACH ROW",
    "cursor-update": "BEFORE UPDATE ON trigger_schedules FOR EACH ROW",
}


@pytest.mark.parametrize("where", list(INJECTIONS))
def test_a_failure_in_any_write_rolls_back_everything(cluster: Cluster, where: str) -> None:
    cluster.publish("t1", misfire="fire_once")
    cluster.make_due("t1")
    cluster.db.execute(
        "CREATE FUNCTION qinglong.boom() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = 'P0001'; END $$")
    cluster.db.execute(f"CREATE TRIGGER boom {INJECTIONS[where]} EXECUTE FUNCTION qinglong.boom()")
    store = cluster.store()
    claim = claim_one(store) if where != "cursor-update" else None
    if where == "cursor-update":
        cluster.db.execute("DROP TRIGGER boom ON trigger_schedules")
        claim = claim_one(store)
        cluster.db.execute(f"CREATE TRIGGER boom {INJECTIONS[where]} EXECUTE FUNCTION qinglong.boom()")
    assert claim is not None
    if where == "misfire-row":  # make the occurrence misfire so the misfire row is written
        cluster.db.execute("ALTER TABLE trigger_schedules DISABLE TRIGGER USER")
        old = claim.fence.acquired_at_ms - 120_000
        cluster.db.execute("UPDATE trigger_schedules SET claim_owner = NULL, claim_token = NULL, "
                           "claim_expires_at_ms = NULL, next_fire_at_ms = %s", [old])
        cluster.db.execute("ALTER TABLE trigger_schedules ENABLE TRIGGER USER")
        claim = claim_one(store)
        assert claim is not None and claim.decide(grace_ms=30_000).misfired
    before = cluster.db.execute("SELECT * FROM trigger_schedules")[0]
    with pytest.raises(StorageError):
        commit(store, claim)
    for table in ("runs", "run_attempts", "run_events", "trigger_schedule_misfires"):
        assert cluster.count(table) == 0, table
    assert cluster.db.execute("SELECT * FROM trigger_schedules")[0] == before


def test_admissions_of_different_triggers_do_not_conflict_once_the_tables_look_small(cluster: Cluster) -> None:
    """ANALYZE on tiny tables makes the planner prefer sequential scans, and a sequential scan
    in a SERIALIZABLE transaction predicate-locks the whole relation: two admissions of
    different triggers, overlapping, would then fail serialization. They must both commit."""
    for trigger in ("t1", "t2"):
        cluster.publish(trigger)
        cluster.make_due(trigger)
    cluster.db.execute("ANALYZE")
    both_in_tx = threading.Barrier(2, timeout=10)
    retried: list[str] = []
    stores = [cluster.store(f"r{n}", before_commit=both_in_tx.wait, on_retry=retried.append) for n in (1, 2)]
    claims = [claim_one(store, owner=f"r{n}") for n, store in zip((1, 2), stores, strict=True)]
    assert all(c is not None for c in claims) and claims[0].candidate.trigger_id != claims[1].candidate.trigger_id  # type: ignore[union-attr]
    with ThreadPoolExecutor(2) as pool:  # both commits wait for each other inside their transactions
        results = list(pool.map(commit, stores, claims))  # type: ignore[arg-type]
    assert sorted(r.outcome.value for r in results) == ["admitted", "admitted"], results
    assert retried == []


def inject_conflicts(cluster: Cluster, name: str, *, grant_to: str, failures: int) -> None:
    """A trigger function ``qinglong.<name>()`` that raises 40001 on its first ``failures``
    calls. It counts them in a sequence (``qinglong.<name>_seen``): sequences are not
    transactional, so the count survives the rollbacks it causes."""
    cluster.db.execute(f"CREATE SEQUENCE qinglong.{name}_seen")
    cluster.db.execute(f"GRANT USAGE ON SEQUENCE qinglong.{name}_seen TO {grant_to}")
    cluster.db.execute(
        f"CREATE FUNCTION qinglong.{name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF nextval('qinglong.{name}_seen') <= {failures} THEN "
        "  RAISE EXCEPTION 'injected conflict' USING ERRCODE = '40001'; "
        "END IF; RETURN NEW; END $$")


def test_serialization_failures_are_retried_before_commit(cluster: Cluster) -> None:
    cluster.publish("t1")
    cluster.make_due("t1")
    inject_conflicts(cluster, "serialize_once", grant_to="ql_runtime", failures=2)
    cluster.db.execute("CREATE TRIGGER serialize_once BEFORE INSERT ON runs "
                       "FOR EACH ROW EXECUTE FUNCTION qinglong.serialize_once()")
    store = cluster.store()
    claim = claim_one(store)
    assert claim is not None
    result = commit(store, claim)
    assert result.outcome is CommitOutcome.ADMITTED
    assert cluster.db.execute("SELECT last_value FROM qinglong.serialize_once_seen")[0]["last_value"] == 3
    assert cluster.count("runs") == 1


def test_a_publish_whose_commit_fails_serialization_is_retried(cluster: Cluster) -> None:
    # A deferred constraint trigger runs inside COMMIT: it fails the first COMMIT with 40001
    # (as SSI does to a pivot), which rolls everything back, so the publisher runs again.
    inject_conflicts(cluster, "fail_first_commit", grant_to="ql_admin", failures=1)
    cluster.db.execute("CREATE CONSTRAINT TRIGGER fail_first_commit AFTER INSERT ON trigger_revisions "
                       "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION qinglong.fail_first_commit()")
    cluster.publish("t1")
    assert cluster.db.execute("SELECT last_value FROM qinglong.fail_first_commit_seen")[0]["last_value"] == 2
    assert cluster.count("trigger_revisions") == 1 and cluster.count("trigger_schedules") == 1


class HeldCommits(SharedHeldCommits):
    """The shared held COMMIT (tests.support.held_commits) on a Cluster's database."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster.db)
        self._cluster = cluster

    def land(self) -> None:
        """Let the held commit land, and wait until its Run is visible."""
        self.release()
        deadline = time.monotonic() + 30
        while self._cluster.count("runs") == 0:
            assert time.monotonic() < deadline, "the held commit did not land"
            time.sleep(0.05)


def test_a_lost_commit_reply_is_resolved_from_durable_facts_not_retried(cluster: Cluster) -> None:
    cluster.publish("t1")
    cluster.make_due("t1")
    store = cluster.store(commit_deadline_s=0.5)
    claim = claim_one(store)
    assert claim is not None
    with HeldCommits(cluster) as held:  # the COMMIT outlives the client's 0.5 s deadline
        with pytest.raises(OutcomeUnknown):  # and the lookup comes before it lands
            commit(store, claim)
        # the client deadline cut the wait: the COMMIT is still held (one that had waited out
        # the hold's minute would have failed, and nothing would land below)
        assert cluster.count("runs") == 0
        held.land()
    assert cluster.count("runs") == 1  # the server committed; nothing was retried
    assert cluster.count("run_attempts") == 1 and cluster.count("run_events") == 2
    again = store.schedule_claim(ScheduleClaimParams(owner="r1", lease_ms=30_000, limit=1))
    assert all(c.candidate.next_fire_at_ms != claim.candidate.next_fire_at_ms for c in again)  # type: ignore[union-attr]


def test_an_in_doubt_commit_that_landed_is_reported_as_admitted(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster.publish("t1")
    cluster.make_due("t1")
    store = cluster.store(commit_deadline_s=0.5)
    claim = claim_one(store)
    assert claim is not None
    with HeldCommits(cluster) as held:
        # where the store waits between the lost reply and its lookup, the commit lands
        monkeypatch.setattr("qinglong.storage.admission.batch.pause", lambda _s: held.land())
        result = commit(store, claim)
    assert result.outcome is CommitOutcome.ADMITTED and result.in_doubt
    assert cluster.count("runs") == 1


def test_the_claim_runs_at_read_committed_and_the_admission_serializable(cluster: Cluster) -> None:
    # Record the isolation level of the transactions that write a claim and a Run, under a
    # database default that would make the claim SERIALIZABLE if the session did not say.
    cluster.db.execute(f"ALTER ROLE ql_runtime IN DATABASE {cluster.db.name} "
                       "SET default_transaction_isolation = 'serializable'")
    cluster.db.execute("CREATE TABLE qinglong.isolation_seen (what text, level text)")
    cluster.db.execute("GRANT INSERT ON qinglong.isolation_seen TO ql_runtime")
    cluster.db.execute(
        "CREATE FUNCTION qinglong.note_isolation() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "INSERT INTO qinglong.isolation_seen VALUES (TG_TABLE_NAME, current_setting('transaction_isolation')); "
        "RETURN NEW; END $$")
    for table in ("trigger_schedule_claims", "runs"):
        cluster.db.execute(f"CREATE TRIGGER note AFTER INSERT ON {table} "
                           "FOR EACH ROW EXECUTE FUNCTION qinglong.note_isolation()")
    cluster.publish("t1")
    cluster.make_due("t1")
    store = cluster.store()
    claim = claim_one(store)
    assert claim is not None and commit(store, claim).outcome is CommitOutcome.ADMITTED
    seen = {(r["what"], r["level"]) for r in cluster.db.execute("SELECT * FROM qinglong.isolation_seen")}
    assert seen == {("trigger_schedule_claims", "read committed"), ("runs", "serializable")}


@pytest.mark.parametrize("how", ["terminate", "idle-timeout", "transaction-timeout"])
def test_a_lost_connection_is_judged_by_its_state_not_the_error_class(cluster: Cluster, how: str) -> None:
    import psycopg

    from qinglong.storage.postgres.connection import connect
    from qinglong.storage.postgres.errors import connection_gone, translate

    def session_ended(pid: int) -> None:
        """Wait until the server has ended the session (however late its timer fires)."""
        deadline = time.monotonic() + 30
        while cluster.count("pg_stat_activity", "pid = %s", [pid]) > 0:
            assert time.monotonic() < deadline, "the server did not end the session"
            time.sleep(0.05)

    conn = connect(cluster.db.url("ql_runtime"), application_name="victim")
    try:
        pid = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]  # type: ignore[index]
        if how == "terminate":
            cluster.db.execute("SELECT pg_terminate_backend(%s)", [pid])  # 57P01
            session_ended(pid)
        elif how == "transaction-timeout":
            if conn.info.server_version < 170000:
                # Before 17 there is no such timeout: which is why ql control sets it on 17+ only.
                with pytest.raises(psycopg.errors.UndefinedObject):
                    conn.execute("SET transaction_timeout = '200ms'")
                return
            conn.execute("SET transaction_timeout = '200ms'")
            conn.execute("BEGIN")
            conn.execute("SELECT 1")
            session_ended(pid)  # 25P04 ends the session: its transaction outlived the timeout
        else:
            conn.execute("SET idle_in_transaction_session_timeout = '200ms'")
            conn.execute("BEGIN")
            conn.execute("SELECT 1")
            session_ended(pid)  # 25P03 ends the session while it sits in the transaction
        with pytest.raises(psycopg.Error) as raised:
            conn.execute("SELECT 1")
        # Different classes (AdminShutdown, IdleInTransactionSessionTimeout, OperationalError)
        # depending on timing; the connection's state alone says it is gone either way.
        assert connection_gone(conn)
        assert translate(raised.value, "probe", conn).code == "QL_CONNECTION_LOST"
    finally:
        conn.close()
