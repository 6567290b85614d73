"""`ql audit` on real PostgreSQL, the reviewer's findings: a database without heartbeats
ends the window at the last scheduling decision (not now), a duplicate after ``--to`` is
still found, and a role that may not read a table gets one clear error, not a traceback."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import pytest

from qinglong.audit.checker import default_end
from qinglong.audit.source import read_input
from qinglong.storage.postgres.connection import SingleConnector
from qinglong.storage.postgres.driver import open_postgres
from tests.e2e.test_cli_errors import Result, assert_one_line_error, ql  # noqa: F401
from tests.integration.conftest import Cluster, cluster_on
from tests.integration.test_audit import (
    check,
    clone_run,
    cluster_from,
    copy_of,
    first_run,
    run_replicas,
)
from tests.support.pg import PgServer, drop_database


@pytest.fixture(scope="module")
def ran_template(pg_server: PgServer, pg_template: str) -> Iterator[str]:
    """A database in which two replica coordinators (no `ql control`, so no heartbeats) ran t1
    for a while; each test gets a copy of its own (one run per worker and server)."""
    db = copy_of(pg_server, pg_template)
    try:
        with cluster_on(db) as cluster:
            cluster.publish("t1")
            run_replicas(cluster, 3.5)
            assert cluster.count("instances") == 0
    finally:
        db.close()
    try:
        yield db.name
    finally:
        drop_database(pg_server, db.name)


@pytest.fixture
def ran(pg_server: PgServer, ran_template: str) -> Iterator[Cluster]:
    with cluster_from(pg_server, ran_template) as cluster:
        yield cluster


def test_without_heartbeats_the_window_ends_at_the_last_decision(ran: Cluster) -> None:
    last_created = int(ran.db.execute("SELECT max(created_at_ms) AS m FROM runs")[0]["m"])  # type: ignore[call-overload]
    # past the next occurrence and the 2 s settle by the database clock: a window ending now
    # would require unadmitted occurrences
    deadline = time.monotonic() + 30
    while ran.db_now() <= last_created + 1_000 + 2_000:
        assert time.monotonic() < deadline, "the database clock did not move on"
        time.sleep(0.05)
    report = check(ran)
    assert report.ok, [t for t in report.triggers if t.violations]
    assert (report.end_ms, report.end_source) == (last_created, "decision")
    assert report.triggers[0].admitted == report.triggers[0].expected >= 1
    assert any("no scheduler heartbeats are recorded" in note for note in report.notes)


def test_the_reader_sees_both_kinds_of_decision_evidence(ran: Cluster) -> None:
    """default_end reads the same records on PostgreSQL as on SQLite (Runs and misfires)."""
    connector = SingleConnector(ran.db.url("ql_runtime"), application_name="test-audit")
    try:
        data = open_postgres(connector).read("audit", lambda tx: read_input(
            tx, now_ms=ran.db_now(), from_ms=0, to_ms=2**62), snapshot=True)
    finally:
        connector.close()
    end = default_end(data)
    assert end.source == "decision" and end.at_ms == max(r.created_at_ms for r in data.runs)


def test_a_duplicate_after_the_explicit_end_is_found(ran: Cluster) -> None:
    runs = ran.db.execute("SELECT * FROM runs WHERE trigger_id = 't1' ORDER BY scheduled_for_ms")
    assert len(runs) >= 3
    end = int(runs[0]["scheduled_for_ms"])  # type: ignore[call-overload]
    clone_run(ran, runs[-1])  # a second Run for an occurrence after --to
    report = check(ran, start_ms=end - 1_000, end_ms=end)
    [t1] = report.triggers
    assert t1.duplicates == 1 and not report.ok, t1
    assert report.end_source == "option"


def test_the_default_window_still_finds_a_duplicate(ran: Cluster) -> None:
    clone_run(ran, first_run(ran))
    assert check(ran).triggers[0].duplicates == 1


def test_audit_as_a_role_without_select_is_one_clear_error(
        ran: Cluster, ql: Callable[..., Result]) -> None:  # noqa: F811
    """ql_admin may not read the claim log: `ql audit` says so, naming the table, with a stable
    code and exit status, on one line and without a traceback."""
    url = ran.db.url("ql_admin")
    text = ql("audit", "--database-url", url)
    line = assert_one_line_error(text, 2, "permission denied", "trigger_schedule_claims",
                                 "SELECT", "ql_admin")
    assert "psycopg" not in line
    as_json = ql("audit", "--database-url", url, "--json")
    assert as_json.code == 2 and "Traceback" not in as_json.err
    problem = json.loads(as_json.err)["error"]
    assert (problem["code"], problem["status"]) == ("QL_PERMISSION_DENIED", 403)
    assert "trigger_schedule_claims" in problem["detail"]


def test_the_runtime_role_can_audit(ran: Cluster, ql: Callable[..., Result]) -> None:  # noqa: F811
    done = ql("audit", "--database-url", ran.db.url("ql_runtime"), "--settle", "2s", "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out)["window"]["to_source"] == "decision"
