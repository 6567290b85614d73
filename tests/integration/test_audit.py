"""`ql audit` on real PostgreSQL: a clean cluster run audits clean, and every kind of
violation planted by hand is found (so the audit cannot pass by not looking)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from qinglong.audit.model import AuditParams, AuditReport
from qinglong.clock import SystemClock
from qinglong.profiles.audit_backend import run_audit
from qinglong.scheduler.coordinator import Coordinator
from qinglong.storage.definitions.params import TriggerPublishParams
from qinglong.storage.postgres.roles import provision_roles
from tests.integration.conftest import Cluster, cluster_on
from tests.support.pg import PgServer, PgTestDatabase, create_database, drop_database
from tests.support.ql_process import run_ql

LEASE = 3_000
GRACE = 30_000


def run_replicas(cluster: Cluster, seconds: float, replicas: int = 2) -> None:
    coordinators = [Coordinator(cluster.store(f"a{n}"), owner=f"a{n}", lease_ms=LEASE,
                                       grace_ms=GRACE, budget=16) for n in range(replicas)]
    stop = threading.Event()

    def loop(c: Coordinator) -> None:
        while not stop.is_set():
            c.run_cycle()
            stop.wait(0.1)

    threads = [threading.Thread(target=loop, args=(c,)) for c in coordinators]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(10)


def check(cluster: Cluster, **kw: object) -> AuditReport:
    params = AuditParams(settle_ms=2_000, grace_ms=GRACE, lease_ms=LEASE, **kw)  # type: ignore[arg-type]
    return run_audit(cluster.db.url("ql_runtime"), SystemClock(), params)


def ran_two_triggers(cluster: Cluster) -> None:
    cluster.publish("t1")
    cluster.publish("t2", cron="*/2 * * * * *", timezone="Europe/Berlin")
    run_replicas(cluster, 3.5)


def copy_of(server: PgServer, template: str) -> PgTestDatabase:
    name = f"qlt_audited_{uuid.uuid4().hex[:16]}"
    create_database(server, name, template=template)
    with server.connect(name) as conn:
        provision_roles(conn)
    return PgTestDatabase(server, name)


@pytest.fixture(scope="module")
def audited_template(pg_server: PgServer, pg_template: str) -> Iterator[str]:
    """A database in which two replicas ran t1 and t2 for 3.5 s. Each test that plants a
    violation gets a copy of its own: the replicas run once per worker and server, not once
    per test."""
    db = copy_of(pg_server, pg_template)
    try:
        with cluster_on(db) as cluster:
            ran_two_triggers(cluster)
    finally:
        db.close()
    try:
        yield db.name
    finally:
        drop_database(pg_server, db.name)


@contextmanager
def cluster_from(server: PgServer, template: str) -> Iterator[Cluster]:
    """A cluster on a copy of ``template`` (what its replicas ran), dropped afterwards."""
    db = copy_of(server, template)
    try:
        with cluster_on(db, fresh=False) as cluster:
            yield cluster
    finally:
        db.close()
        drop_database(server, db.name)


@pytest.fixture
def audited(pg_server: PgServer, audited_template: str) -> Iterator[Cluster]:
    with cluster_from(pg_server, audited_template) as cluster:
        yield cluster


def first_run(cluster: Cluster, trigger: str = "t1") -> dict[str, object]:
    return cluster.db.execute(
        "SELECT * FROM runs WHERE trigger_id = %s ORDER BY scheduled_for_ms LIMIT 1", [trigger])[0]


def test_a_clean_cluster_run_audits_clean(cluster: Cluster) -> None:
    ran_two_triggers(cluster)
    run_replicas(cluster, 2.5)  # 6 s in all: at least 3 occurrences past the 2 s settle
    report = check(cluster)
    assert report.ok, report
    t1 = next(t for t in report.triggers if t.trigger_id == "t1")
    assert t1.expected >= 3 and t1.admitted == t1.expected and t1.lags_ms


def test_a_missing_run_is_an_unexplained_gap(audited: Cluster) -> None:
    run = first_run(audited)
    for table in ("run_events", "run_attempts"):
        audited.db.execute(f"DELETE FROM {table} WHERE run_id = %s", [run["id"]])
    audited.db.execute("DELETE FROM runs WHERE id = %s", [run["id"]])
    report = check(audited)
    t1 = next(t for t in report.triggers if t.trigger_id == "t1")
    assert t1.gaps_unexplained == [run["scheduled_for_ms"]] and not report.ok


def clone_run(cluster: Cluster, run: dict[str, object], **changes: object) -> str:
    new_id = str(uuid.uuid4())
    values = {**run, "id": new_id, "idempotency_key": f"planted:{new_id}", **changes}
    columns = ", ".join(values)
    cluster.db.execute(f"INSERT INTO runs ({columns}) VALUES ({', '.join(['%s'] * len(values))})",
                       list(values.values()))
    return new_id


def test_a_duplicate_run_is_found(audited: Cluster) -> None:
    clone_run(audited, first_run(audited))
    t1 = next(t for t in check(audited).triggers if t.trigger_id == "t1")
    assert t1.duplicates == 1


def test_a_run_off_the_schedule_is_spurious(audited: Cluster) -> None:
    run = first_run(audited)
    clone_run(audited, run, scheduled_for_ms=int(run["scheduled_for_ms"]) + 500)  # type: ignore[call-overload]
    t1 = next(t for t in check(audited).triggers if t.trigger_id == "t1")
    assert t1.spurious == [int(run["scheduled_for_ms"]) + 500]  # type: ignore[call-overload]


def test_a_run_without_its_events_has_a_bad_shape(audited: Cluster) -> None:
    run = first_run(audited)
    audited.db.execute("DELETE FROM run_events WHERE run_id = %s AND sequence = 2", [run["id"]])
    t1 = next(t for t in check(audited).triggers if t.trigger_id == "t1")
    assert t1.bad_shape == [run["id"]]


def test_a_run_admitted_after_its_claim_was_taken_over_is_fenced_out(audited: Cluster) -> None:
    run = first_run(audited)
    payload = audited.db.execute(
        "SELECT payload FROM run_events WHERE run_id = %s AND sequence = 1", [run["id"]])[0]["payload"]
    version = int(payload["claim_version"])  # type: ignore[index]
    # Renumber the grant that admitted the Run and plant a newer grant acquired before the
    # Run's commit: that is what a stale holder committing after a takeover looks like. (The
    # commit may come within a millisecond of its claim: the planted grant is dated by the
    # Run's commit, one millisecond before it.)
    audited.db.execute(
        "UPDATE trigger_schedule_claims SET claim_version = claim_version + 100000 "
        "WHERE trigger_id = 't1' AND claim_version > %s", [version])
    audited.db.execute(
        "INSERT INTO trigger_schedule_claims SELECT project_id, trigger_id, trigger_revision, %s, "
        "'thief', gen_random_uuid(), cursor_ms, %s, expires_at_ms "
        "FROM trigger_schedule_claims WHERE trigger_id = 't1' AND claim_version = %s",
        [version + 1, int(run["created_at_ms"]) - 1, version])  # type: ignore[call-overload]
    t1 = next(t for t in check(audited).triggers if t.trigger_id == "t1")
    assert run["id"] in t1.fenced_out


def test_a_cursor_that_moved_back_is_found(audited: Cluster) -> None:
    top = audited.db.execute(
        "SELECT * FROM trigger_schedule_claims WHERE trigger_id = 't1' AND cursor_ms IS NOT NULL "
        "ORDER BY claim_version DESC LIMIT 1")[0]
    audited.db.execute(
        "INSERT INTO trigger_schedule_claims (project_id, trigger_id, trigger_revision, claim_version, "
        "claim_owner, claim_token, cursor_ms, acquired_at_ms, expires_at_ms) "
        "VALUES ('demo', 't1', %s, %s, 'x', gen_random_uuid(), %s, %s, %s)",
        [top["trigger_revision"], int(top["claim_version"]) + 1000, int(top["cursor_ms"]) - 5000,  # type: ignore[call-overload]
         top["acquired_at_ms"], top["expires_at_ms"]])
    t1 = next(t for t in check(audited).triggers if t.trigger_id == "t1")
    assert t1.cursor_regressions == 1


def test_misfires_and_republished_triggers_explain_their_gaps(cluster: Cluster) -> None:
    cluster.publish("late", misfire="fire_once")
    cluster.publish("moved")
    # 'late' was published two minutes "ago": its first occurrences misfire (recorded).
    cluster.db.execute("UPDATE trigger_revisions SET created_at_ms = created_at_ms - 120000 "
                       "WHERE trigger_id = 'late'")
    cluster.db.execute("UPDATE trigger_revisions SET content_digest = content_digest WHERE FALSE")
    run_replicas(cluster, 3)
    cluster.admin.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="moved",
                                                       expression="*/3 * * * * *"))
    run_replicas(cluster, 3)
    report = check(cluster)
    late = next(t for t in report.triggers if t.trigger_id == "late")
    assert late.gaps_misfire > 60 and late.misfire_violations == [], late
    assert not late.gaps_unexplained
    moved = next(t for t in report.triggers if t.trigger_id == "moved")
    assert not moved.gaps_unexplained and not moved.spurious
    assert report.ok, [t for t in report.triggers if t.violations]


def test_a_run_committed_after_its_claim_expired_is_fenced_out(audited: Cluster) -> None:
    run = first_run(audited)
    payload = audited.db.execute(
        "SELECT payload FROM run_events WHERE run_id = %s AND sequence = 1", [run["id"]])[0]["payload"]
    # The claim's lease ended before the Run's commit time: a commit the fence should have refused.
    audited.db.execute(
        "UPDATE trigger_schedule_claims SET expires_at_ms = %s WHERE trigger_id = 't1' AND claim_version = %s",
        [run["created_at_ms"], payload["claim_version"]])  # type: ignore[index]
    t1 = next(t for t in check(audited).triggers if t.trigger_id == "t1")
    assert t1.fenced_out == [run["id"]]


@pytest.fixture
def misfired(cluster: Cluster) -> Cluster:
    cluster.publish("late", misfire="skip")
    cluster.db.execute("UPDATE trigger_revisions SET created_at_ms = created_at_ms - 120000 "
                       "WHERE trigger_id = 'late'")
    run_replicas(cluster, 2)
    assert cluster.db.execute("SELECT count(*) AS n FROM trigger_schedule_misfires")[0]["n"] >= 1
    return cluster


def misfire_violations(cluster: Cluster) -> list[str]:
    late = next(t for t in check(cluster).triggers if t.trigger_id == "late")
    return late.misfire_violations


def test_a_recorded_misfire_audits_clean(misfired: Cluster) -> None:
    assert misfire_violations(misfired) == []


def test_a_misfire_recorded_under_another_policy_is_a_violation(misfired: Cluster) -> None:
    misfired.db.execute("UPDATE trigger_schedule_misfires SET policy = 'fire_once'")
    assert any(v.startswith("misfire-policy-fire_once-not-skip@") for v in misfire_violations(misfired))


def test_a_misfire_that_dropped_occurrences_still_within_grace_is_a_violation(misfired: Cluster) -> None:
    # decided 5 s before the last dropped occurrence was out of grace
    misfired.db.execute(f"UPDATE trigger_schedule_misfires SET decided_at_ms = skipped_through_ms + {GRACE} - 5000")
    assert any(v.startswith("misfire-dropped-within-grace@") for v in misfire_violations(misfired))


def test_the_ledger_catches_double_and_missing_deliveries(audited: Cluster, tmp_path: Path) -> None:
    run = first_run(audited)
    line = {"project": "demo", "trigger": "t1", "scheduled_for_ms": run["scheduled_for_ms"],
            "run_id": run["id"]}
    ledger = [line, {**line, "run_id": str(uuid.uuid4())}]
    report = run_audit(audited.db.url("ql_runtime"), SystemClock(),
                       AuditParams(settle_ms=2_000, lease_ms=LEASE), ledger)  # type: ignore[arg-type]
    assert report.ledger is not None
    assert report.ledger.double_deliveries == [f"t1@{run['scheduled_for_ms']}"]
    assert report.ledger.missing == [f"t1@{run['scheduled_for_ms']}"]
    path = tmp_path / "ledger.jsonl"
    path.write_text("\n".join(json.dumps(entry) for entry in ledger) + "\n")
    done = run_ql(["audit", "--database-url", audited.db.url("ql_runtime"), "--lease", "3s",
                   "--settle", "2s", "--ledger", str(path), "--json"], timeout=60)
    assert done.returncode == 5, done.stderr
    assert json.loads(done.stdout)["ledger"]["double_deliveries"] == [f"t1@{run['scheduled_for_ms']}"]


def test_the_cli_exits_zero_when_clean_and_two_on_bad_input(audited: Cluster) -> None:
    base = ["audit", "--database-url", audited.db.url("ql_runtime"), "--lease", "3s",
            "--settle", "2s"]
    clean = run_ql([*base, "--json"], timeout=60)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert json.loads(clean.stdout)["ok"] is True
    bad = run_ql([*base, "--from", "yesterday"], timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
