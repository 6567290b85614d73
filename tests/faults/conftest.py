"""A bed for fault tests: a database, real `ql control` replica processes with a short test
lease, an acknowledged-admission ledger, and the audit as the judge."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from qinglong.audit.model import AuditParams, AuditReport
from qinglong.clock import SystemClock
from qinglong.domain.task import ArgvCommand, CommandSpec
from qinglong.profiles.audit_backend import run_audit
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.postgres.connection import SingleConnector
from qinglong.storage.postgres.driver import open_postgres
from testkit.cluster import Replica
from tests.support.pg import PgTestDatabase

LEASE_MS = 3_000
GRACE_MS = 30_000
AUDIT_SETTLE_MS = 2_000  # the audit requires occurrences up to its window's end less this
# what PostgreSQL logs when it ends a session for idle_in_transaction_session_timeout or
# (PostgreSQL 17+) transaction_timeout
TIMEOUT_TERMINATIONS = ("terminating connection due to idle-in-transaction timeout",
                        "terminating connection due to transaction timeout")


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 30.0, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@dataclass
class FaultBed:
    db: PgTestDatabase
    tmp: Path
    ledger: Path
    admin: DefinitionStore
    _connector: SingleConnector
    replicas: list[Replica] = field(default_factory=list)

    def publish(self, trigger: str, cron: str = "* * * * * *", misfire: str = "skip", **kw: Any) -> None:
        self.admin.trigger_publish(TriggerPublishParams(
            project_id="demo", trigger_id=trigger, task_id="hello", expression=cron,
            timezone="UTC", misfire_policy=misfire, **kw))

    def replica(self, owner: str, *extra: str, url: str | None = None, lease_ms: int = LEASE_MS) -> Replica:
        replica = Replica(owner, url or self.db.url("ql_runtime"), self.tmp, lease_ms=lease_ms,
                          grace_ms=GRACE_MS, extra=("--interval-ms", "250", "--reactivate-ms", "200",
                                                    "--ack-ledger", str(self.ledger), *extra))
        self.replicas.append(replica)
        return replica

    def rows(self, sql: str, params: Any = None) -> list[dict[str, Any]]:
        with psycopg.connect(self.db.server.url("postgres", self.db.name), autocommit=True,
                             row_factory=dict_row) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def now(self) -> int:
        return int(self.rows("SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS n")[0]["n"])

    def backends(self, owner: str) -> list[dict[str, Any]]:
        return self.rows("SELECT pid, state, backend_xid IS NOT NULL AS writing, "
                         "(floor(extract(epoch FROM state_change) * 1000))::bigint AS state_change_ms "
                         "FROM pg_stat_activity "
                         "WHERE datname = %s AND application_name = %s", [self.db.name, f"ql-control:{owner}"])

    def holding_transaction(self, owner: str) -> dict[str, Any] | None:
        """The owner's backend that sits idle inside an admission transaction, if any: one
        that has written a Run (it holds its lock on ``qinglong.runs``). Idle inside some
        transaction that has written is not enough: the replica's other short transactions
        (its instance heartbeat, say) pass through that state for a moment between their
        statements, and a test that froze the replica then would wait for a timeout that
        never comes, since that transaction has committed."""
        held = self.rows(
            "SELECT a.pid, a.state, true AS writing, "
            "(floor(extract(epoch FROM a.state_change) * 1000))::bigint AS state_change_ms "
            "FROM pg_stat_activity a WHERE a.datname = %s AND a.application_name = %s "
            "AND a.state = 'idle in transaction' AND a.backend_xid IS NOT NULL "
            "AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.granted "
            "AND l.locktype = 'relation' AND l.mode = 'RowExclusiveLock' "
            "AND l.relation = 'qinglong.runs'::regclass)", [self.db.name, f"ql-control:{owner}"])
        return held[0] if held else None

    def server_ended(self, pid: int) -> int | None:
        """When (database clock, ms) the server ended backend ``pid`` for one of its own timeouts
        (idle in transaction, or the whole transaction), read from the server's log; None if
        the log does not say so (yet)."""
        embedded = self.db.server.embedded
        assert embedded is not None, "the fault tests run on the embedded server only"
        log = (embedded.data_dir / "server.log").read_text(errors="replace")
        lines = [line for line in log.splitlines() if f" [{pid}] " in line and any(
            reason in line for reason in TIMEOUT_TERMINATIONS)]
        if not lines:
            return None
        stamp = lines[-1].split(" [", 1)[0]  # log_line_prefix '%m [%p] %a '
        return int(self.rows("SELECT (floor(extract(epoch FROM %s::timestamptz) * 1000))::bigint AS ms",
                             [stamp])[0]["ms"])

    def claims_by(self, owner: str) -> list[dict[str, Any]]:
        return self.rows("SELECT * FROM qinglong.trigger_schedule_claims WHERE claim_owner = %s "
                         "ORDER BY acquired_at_ms", [owner])

    def run_for(self, trigger: str, scheduled_for_ms: int) -> list[dict[str, Any]]:
        return self.rows(
            "SELECT r.id, r.created_at_ms, e.payload ->> 'claim_owner' AS owner, "
            "e.payload ->> 'claim_token' AS token FROM qinglong.runs r "
            "JOIN qinglong.run_events e ON e.run_id = r.id AND e.sequence = 1 "
            "WHERE r.trigger_id = %s AND r.scheduled_for_ms = %s", [trigger, scheduled_for_ms])

    def ledger_lines(self) -> list[dict[str, object]]:
        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text().splitlines() if line.strip()]

    def audit(self, start_ms: int, end_ms: int | None = None, settle_ms: int = AUDIT_SETTLE_MS) -> AuditReport:
        params = AuditParams(start_ms=start_ms, end_ms=end_ms, settle_ms=settle_ms,
                             grace_ms=GRACE_MS, lease_ms=LEASE_MS)
        return run_audit(self.db.url("ql_runtime"), SystemClock(), params, self.ledger_lines())

    def assert_exactly_once(self, start_ms: int, end_ms: int | None = None) -> AuditReport:
        report = self.audit(start_ms, end_ms)
        bad = {t.trigger_id: {k: v for k, v in {
            "duplicates": t.duplicates, "gaps": t.gaps_unexplained, "spurious": t.spurious,
            "fenced_out": t.fenced_out, "bad_shape": t.bad_shape, "cursor": t.cursor_regressions,
            "misfires": t.misfire_violations}.items() if v} for t in report.triggers if t.violations}
        assert report.ok, (bad, report.ledger)
        assert sum(t.admitted for t in report.triggers) > 0
        return report

    def behind(self, by_ms: int = 1_000) -> int:
        """How many enabled triggers have an occurrence due more than ``by_ms`` ago unadmitted."""
        return self.undecided_by(self.now() - by_ms - 1)

    def undecided_by(self, at_ms: int) -> int:
        """How many enabled triggers have an occurrence due at or before ``at_ms`` undecided."""
        return int(self.rows(
            "SELECT count(*) AS n FROM qinglong.trigger_schedules s JOIN qinglong.trigger_revisions tr "
            "ON tr.project_id = s.project_id AND tr.trigger_id = s.trigger_id AND tr.revision = s.trigger_revision "
            "WHERE tr.enabled AND s.next_fire_at_ms <= %s", [at_ms])[0]["n"])

    def settle(self, timeout: float = 20.0) -> bool:
        """Wait (bounded) until the live replicas have caught up. A stop drains only the claims
        in hand, so a test that judges a window up to its stop lets the cluster settle first;
        whether it did is for the audit to judge, not this wait."""
        if not any(r.process is not None and r.process.poll() is None for r in self.replicas):
            return self.behind() == 0
        deadline = time.monotonic() + timeout
        while self.behind() and time.monotonic() < deadline:
            time.sleep(0.05)
        # A window that ends at the stop requires occurrences only up to its end less the
        # audit's settle time: run on past the latest admitted one by that much, or a quick
        # test (a takeover that came at once) would have its one admission left unjudged.
        latest = self.rows("SELECT max(scheduled_for_ms) AS at FROM qinglong.runs")[0]["at"]
        if latest is not None:
            while self.now() <= int(latest) + AUDIT_SETTLE_MS + 250 and time.monotonic() < deadline + 5:
                time.sleep(0.05)
        return self.behind() == 0

    def stop_all(self, settle: bool = True) -> list[int]:
        if settle:
            self.settle()
        codes = []
        for replica in self.replicas:
            if replica.process is not None and replica.process.poll() is None:
                codes.append(replica.stop())
        return codes

    def close(self) -> None:
        for replica in self.replicas:
            if replica.process is not None and replica.process.poll() is None:
                replica.process.kill()
                replica.process.wait(10)
        self._connector.close()


@pytest.fixture
def bed(pg_db: PgTestDatabase, tmp_path: Path) -> Iterator[FaultBed]:
    connector = SingleConnector(pg_db.url("ql_admin"))
    admin = DefinitionStore(open_postgres(connector))
    admin.project_create(ProjectCreateParams(project_id="demo"))
    admin.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="hello",
                                         spec=CommandSpec(command=ArgvCommand(file="/bin/true"))))
    fault_bed = FaultBed(db=pg_db, tmp=tmp_path, ledger=tmp_path / "acked.jsonl", admin=admin,
                         _connector=connector)
    try:
        yield fault_bed
    finally:
        fault_bed.close()
