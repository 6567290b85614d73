"""Retention (docs/retention.md) on every database: claim records (PostgreSQL) and the events of
Runs that ended before the horizon are pruned; recent ones, the latest claim of a schedule row,
claims of a trigger with an unfinished old Run and every event of an unfinished Run are kept;
replicas pruning at once delete each row once; and the audit stays clean after pruning.

Rows are made old by moving their timestamps back as the database owner (the same amount for
a Run and the claim that admitted it, so the fence evidence stays consistent)."""

from __future__ import annotations

import threading
import time

import pytest

from qinglong.audit.checker import audit as audit_admissions
from qinglong.audit.model import AuditParams, AuditReport
from qinglong.audit.source import read_input
from qinglong.domain.retention import CLOCK_JUMP_PATIENCE, DAY_MS, PruneReport
from qinglong.errors import PermissionDenied
from qinglong.storage.retention import Pruner, open_retention, table_sizes
from qinglong.testing import FakeClock
from tests.conftest import SqliteStores
from tests.contract.conftest import Backend, PgBackend, SqliteBackend
from tests.contract.test_execution_audit import audit as audit_execution
from tests.contract.test_leases import acquire
from tests.contract.test_retries_and_overlap import SUCCEEDED, admit, finish, publish

OLD_MS = 40 * DAY_MS  # past the 30-day retention the pruners run with
RETENTION_DAYS = 30


def _sql(backend: Backend, statement: str, params: tuple[object, ...] = ()) -> list[dict[str, object]]:
    """As the database owner; ``?`` placeholders on every database."""
    return backend.sql(statement, *params)


def _pruner(backend: Backend, days: int = RETENTION_DAYS, **kwargs: int) -> Pruner:
    """The database's pruner, as `ql serve` / `ql control` (ql_runtime) run it."""
    return open_retention(backend.database("ql_runtime", "retention"), backend.clock(),
                          days=days, **kwargs)


@pytest.fixture
def pruner(backend: Backend) -> Pruner:
    return _pruner(backend)


def _events(backend: Backend, run_id: str) -> int:
    [row] = _sql(backend, "SELECT count(*) AS n FROM run_events WHERE run_id = ?", (run_id,))
    return int(str(row["n"]))


def _age_runs(backend: Backend, run_ids: list[str], ms: int) -> None:
    for run_id in run_ids:
        _sql(backend, "UPDATE runs SET created_at_ms = created_at_ms - ?, "
                      "queued_at_ms = queued_at_ms - ?, started_at_ms = started_at_ms - ?, "
                      "finished_at_ms = finished_at_ms - ? WHERE id = ?",
             (ms, ms, ms, ms, run_id))
    if backend.capabilities.shared:  # claims are logged: the fence evidence ages with its Run
        for run_id in run_ids:
            # (the Run's own row's claim: the rows one statement claimed share its token)
            _sql(backend, "UPDATE trigger_schedule_claims c SET acquired_at_ms = acquired_at_ms - ?, "
                          "expires_at_ms = expires_at_ms - ? FROM run_events e, runs r "
                          "WHERE e.run_id = ? AND e.sequence = 1 AND r.id = e.run_id "
                          "AND c.project_id = r.project_id AND c.trigger_id = r.trigger_id "
                          "AND c.claim_version = (e.payload ->> 'claim_version')::integer "
                          "AND c.claim_token::text = e.payload ->> 'claim_token'",
                 (ms, ms, run_id))


def _carry_out(backend: Backend, trigger: str, count: int) -> list[str]:
    """``count`` Runs of ``trigger`` admitted and run to success by the lifecycle steps."""
    run_ids = admit(backend, trigger, count=count)
    for lease in acquire(backend, limit=count):
        finish(backend, lease, SUCCEEDED)
    return run_ids


def test_events_of_runs_ended_before_the_horizon_go_the_rest_stay(
        backend: Backend, pruner: Pruner) -> None:
    publish(backend, triggers=("t1", "t2", "t3"))
    old = _carry_out(backend, "t1", 3)
    recent = _carry_out(backend, "t2", 2)
    queued, lost = admit(backend, "t3", count=2)  # never leased: unfinished
    _sql(backend, "UPDATE runs SET created_at_ms = created_at_ms - ? WHERE id = ?", (OLD_MS, queued))
    _sql(backend, "UPDATE runs SET status = 'lost', finished_at_ms = created_at_ms - ? "
                  "WHERE id = ?", (OLD_MS, lost))  # lost may still be retried: not ended
    _age_runs(backend, old, OLD_MS)
    _age_runs(backend, recent, 10 * DAY_MS)  # within the retention
    before = {run_id: _events(backend, run_id) for run_id in [*old, *recent, queued, lost]}
    assert all(n >= 2 for n in before.values()), before

    report = pruner.prune()
    assert report.events == sum(before[run_id] for run_id in old)
    assert [_events(backend, run_id) for run_id in old] == [0, 0, 0]
    for run_id in [*recent, queued, lost]:
        assert _events(backend, run_id) == before[run_id]
    assert pruner.prune().events == 0  # a second pass finds nothing more
    for run_id in old:  # the Run rows, and so occurrence uniqueness, are kept
        assert backend.runs.run_get(run_id).run.status == "succeeded"


def test_a_small_batch_sweeps_the_whole_history_over_several_passes(backend: Backend) -> None:
    publish(backend)
    old = _carry_out(backend, "t1", 5)
    _age_runs(backend, old, OLD_MS)
    made = _pruner(backend, batch=2, statements=1)  # two Runs per statement, one per pass
    deleted = [made.prune().events for _ in range(4)]
    assert sum(deleted) > 0 and all(_events(backend, run_id) == 0 for run_id in old), deleted


def test_the_audit_judges_what_remains_after_pruning(backend: Backend, pruner: Pruner) -> None:
    publish(backend, triggers=("t1", "t2"))
    old = _carry_out(backend, "t1", 3)
    recent = _carry_out(backend, "t2", 2)
    _age_runs(backend, old, OLD_MS)
    pruner.prune()
    assert all(_events(backend, run_id) == 0 for run_id in old)

    execution = audit_execution(backend)
    assert execution.violations == 0, execution.findings()
    assert execution.pruned == len(old)
    report = _admission_audit(backend)
    by_trigger = {t.trigger_id: t for t in report.triggers}
    assert by_trigger["t1"].evidence_pruned == sorted(old)
    assert by_trigger["t2"].evidence_pruned == []
    for t in report.triggers:
        assert (t.bad_shape, t.fenced_out, t.duplicates, t.cursor_regressions) == ([], [], 0, 0)
    # the mark the pruner recorded with its deletes: the horizon it used (now - 30 days)
    [mark] = _sql(backend, "SELECT pruned_before_ms FROM retention_marks "
                           "WHERE subject = 'run_events'")
    horizon = int(str(mark["pruned_before_ms"]))
    assert abs(horizon - (backend.now_ms() - RETENTION_DAYS * DAY_MS)) < 60_000, horizon
    assert report.evidence_horizon_ms is not None and report.evidence_horizon_ms >= horizon
    assert any("retention" in note for note in report.notes)

    # after the horizon nothing is ever pruned: events missing there are still violations
    _sql(backend, "DELETE FROM run_events WHERE run_id = ?", (recent[0],))
    assert [f.split(":")[0] for f in audit_execution(backend).terminal_events] == [recent[0]]
    by_trigger = {t.trigger_id: t for t in _admission_audit(backend).triggers}
    assert by_trigger["t2"].bad_shape == [recent[0]]


def test_old_events_missing_with_no_retention_mark_are_violations(backend: Backend) -> None:
    """No pruner ran (no mark): events missing from a Run that ended long ago were not pruned
    by retention, so the audit reports them, however old the Run."""
    publish(backend, triggers=("t1", "t2"))
    old = _carry_out(backend, "t1", 2)
    _carry_out(backend, "t2", 1)  # a recent decision: the audit window reaches now
    _age_runs(backend, old, OLD_MS)
    _sql(backend, "DELETE FROM run_events WHERE run_id = ?", (old[0],))
    assert _sql(backend, "SELECT * FROM retention_marks") == []
    execution = audit_execution(backend)
    assert execution.pruned == 0
    assert [f.split(":")[0] for f in execution.terminal_events] == [old[0]]
    by_trigger = {t.trigger_id: t for t in _admission_audit(backend).triggers}
    assert by_trigger["t1"].bad_shape == [old[0]] and by_trigger["t1"].evidence_pruned == []


def test_a_mark_from_a_clock_that_ran_ahead_excuses_nothing_recent(backend: Backend) -> None:
    """A retention mark later than a day ago came from a clock that ran ahead: the audit
    believes it only up to a day ago, so events missing from a recent Run are a violation."""
    publish(backend, triggers=("t1",))
    [recent, _] = _carry_out(backend, "t1", 2)
    ahead = backend.now_ms() + 300 * DAY_MS
    _sql(backend, "INSERT INTO retention_marks (subject, pruned_before_ms) "
                  "VALUES ('run_events', ?), ('claims', ?)", (ahead, ahead))
    _sql(backend, "DELETE FROM run_events WHERE run_id = ?", (recent,))
    execution = audit_execution(backend)
    assert execution.pruned == 0
    assert [f.split(":")[0] for f in execution.terminal_events] == [recent]
    report = _admission_audit(backend)
    [t1] = report.triggers
    assert t1.bad_shape == [recent] and t1.evidence_pruned == []
    assert any("ran ahead" in note for note in report.notes), report.notes


def test_sqlite_skips_a_pass_after_the_wall_clock_jumped_ahead(
        sqlite_stores: SqliteStores, clock: FakeClock) -> None:
    """`ql serve` reads the horizon from its own clock: after the wall clock jumped a year
    ahead (the monotonic clock did not move with it), passes delete nothing and leave no
    mark, until the new clock has held for CLOCK_JUMP_PATIENCE passes."""
    backend = SqliteBackend(stores=sqlite_stores, fake_clock=clock)
    assert not backend.capabilities.database_clock  # the horizon comes from the node's clock
    publish(backend, triggers=("t1",))
    runs = _carry_out(backend, "t1", 2)
    jumpy = _JumpyClock(clock)
    pruner = open_retention(backend.kernel, jumpy, days=RETENTION_DAYS)
    assert pruner.prune().events == 0  # a first pass: the baseline
    marked = _sql(backend, "SELECT * FROM retention_marks")
    jumpy.jump(365 * DAY_MS)
    for _ in range(CLOCK_JUMP_PATIENCE):
        assert pruner.prune() == PruneReport()
    assert all(_events(backend, run_id) > 0 for run_id in runs)
    assert _sql(backend, "SELECT * FROM retention_marks") == marked  # the mark stayed
    assert pruner.prune().events > 0  # the new clock held: it is believed
    assert all(_events(backend, run_id) == 0 for run_id in runs)


class _JumpyClock:
    """The backend's clock, with a wall clock that can jump while the monotonic one stays."""

    def __init__(self, inner: FakeClock) -> None:
        self._inner = inner
        self._offset = 0

    def jump(self, ms: int) -> None:
        self._offset += ms

    def now_ms(self) -> int:
        return self._inner.now_ms() + self._offset

    def monotonic(self) -> float:
        return self._inner.monotonic()


def _admission_audit(backend: Backend) -> AuditReport:
    now = backend.now_ms()
    data = backend.database("ql_runtime", "contract-audit").read(
        "audit", lambda tx: read_input(tx, now_ms=now, from_ms=0, to_ms=2**62), snapshot=True)
    return audit_admissions(data, AuditParams(start_ms=0))


# --- claim records (PostgreSQL) --------------------------------------------------------------


def _claims(backend: PgBackend, trigger: str) -> list[int]:
    rows = backend.db.execute("SELECT claim_version FROM trigger_schedule_claims "
                              "WHERE trigger_id = %s ORDER BY claim_version", [trigger])
    return [int(str(r["claim_version"])) for r in rows]


def test_old_claims_go_but_never_the_latest_claim_of_a_schedule_row(
        pg_backend: PgBackend) -> None:
    """Old claims go whatever became of their Runs (queued ones included: the audit knows the
    claims mark), except each schedule row's latest claim, the fence the next claim compares
    with."""
    backend = pg_backend
    publish(backend, triggers=("t1", "t2", "t3"))
    old = _carry_out(backend, "t1", 3)
    recent = _carry_out(backend, "t2", 2)
    waiting = admit(backend, "t3", count=2)  # queued, never leased
    _age_runs(backend, old, OLD_MS)
    _age_runs(backend, waiting, OLD_MS)
    backend.db.execute("UPDATE trigger_schedule_claims SET acquired_at_ms = acquired_at_ms - %s, "
                       "expires_at_ms = expires_at_ms - %s WHERE trigger_id = 't3'",
                       [OLD_MS, OLD_MS])
    t1, t2, t3 = _claims(backend, "t1"), _claims(backend, "t2"), _claims(backend, "t3")
    aged = [int(str(r["claim_version"])) for r in backend.db.execute(
        "SELECT claim_version FROM trigger_schedule_claims WHERE trigger_id = 't1' "
        "AND acquired_at_ms < %s ORDER BY claim_version", [backend.now_ms() - OLD_MS // 2])]
    assert len(aged) == 3 and len(t2) >= 2 and len(t3) >= 2, (t1, aged, t2, t3)
    [latest] = backend.db.execute("SELECT claim_version FROM trigger_schedules "
                                  "WHERE trigger_id = 't1'")
    assert latest["claim_version"] == t1[-1] == aged[-1]

    report = _pruner(backend).prune()
    assert report.claims == 2 + len(t3) - 1
    assert _claims(backend, "t1") == [v for v in t1 if v not in aged[:-1]]  # the latest stays
    assert _claims(backend, "t2") == t2  # recent
    assert _claims(backend, "t3") == t3[-1:]  # queued Runs pin nothing; the latest stays
    assert recent  # (carried out: their claims are simply young)


def test_the_claims_sweep_wraps_round_to_a_latest_claim_superseded_behind_it(
        pg_backend: PgBackend) -> None:
    """A small sweep passes a row's latest claim (kept), reaches the end and starts over; once
    a newer claim supersedes it, a later sweep deletes it. A pinned latest claim never stops
    the sweep from reaching the claims after it."""
    backend = pg_backend
    publish(backend, triggers=("t1", "t2"))
    first = admit(backend, "t1", count=2)
    second = admit(backend, "t2", count=3)
    backend.db.execute("UPDATE trigger_schedule_claims SET acquired_at_ms = acquired_at_ms - %s, "
                       "expires_at_ms = expires_at_ms - %s", [OLD_MS, OLD_MS])
    t1, t2 = _claims(backend, "t1"), _claims(backend, "t2")
    made = _pruner(backend, batch=1, statements=1)
    passes = 0
    while len(_claims(backend, "t1")) + len(_claims(backend, "t2")) > 2:
        made.prune()
        passes += 1
        assert passes <= 3 * (len(t1) + len(t2)), "the sweep stopped"
    assert _claims(backend, "t1") == t1[-1:] and _claims(backend, "t2") == t2[-1:]
    for _ in range(len(t1) + len(t2) + 2):  # the sweep passes both kept claims again
        made.prune()
    assert _claims(backend, "t1") == t1[-1:]
    backend.pass_time(1_100)  # a later occurrence (the admissions above used the last seconds)
    admit(backend, "t1", count=1)  # a new (young) claim supersedes the kept one
    newest = _claims(backend, "t1")[-1]
    for _ in range(3 * (len(t1) + len(t2)) + 2):
        if _claims(backend, "t1") == [newest]:
            break
        made.prune()
    assert _claims(backend, "t1") == [newest], "the superseded claim was never swept"
    assert _claims(backend, "t2") == t2[-1:]
    assert first and second


def _sizes(backend: PgBackend) -> dict[str, int]:
    return table_sizes(backend.database("ql_runtime", "retention-sizes"))


def test_replicas_pruning_at_once_delete_each_row_once(pg_backend: PgBackend) -> None:
    backend = pg_backend
    publish(backend)
    claims, runs = 6_000, 1_500
    db = backend.db
    db.execute("UPDATE trigger_schedules SET claim_version = %s WHERE trigger_id = 't1'",
               [claims + 10])
    db.execute(
        "INSERT INTO trigger_schedule_claims (project_id, trigger_id, trigger_revision, "
        "claim_version, claim_owner, claim_token, cursor_ms, acquired_at_ms, expires_at_ms) "
        "SELECT 'demo', 't1', 1, v, 'r1', gen_random_uuid(), v * 1000, 1000 + v, 31000 + v "
        "FROM generate_series(1, %s) v", [claims])
    db.execute(
        "INSERT INTO runs (id, project_id, task_id, task_revision, trigger_type, "
        "execution_origin, execution_owner, status, version, event_sequence, created_at_ms, "
        "finished_at_ms) SELECT 'seed-' || n, 'demo', 'job', 'x', 'manual', 'manual', "
        "'runtime', CASE WHEN n %% 10 = 0 THEN 'running' ELSE 'succeeded' END, 1, 3, n, "
        "CASE WHEN n %% 10 = 0 THEN NULL ELSE 1000 + n END FROM generate_series(1, %s) n",
        [runs])
    db.execute(
        "INSERT INTO run_events (id, run_id, sequence, type, actor_type, payload, created_at_ms) "
        "SELECT gen_random_uuid()::text, 'seed-' || n, s, 'run.seed', 'system', '{}', n "
        "FROM generate_series(1, %s) n, generate_series(1, 3) s", [runs])
    before = _sizes(backend)
    unfinished = runs // 10

    deleted: list[tuple[int, int]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    pruners = [_pruner(backend, batch=500, statements=3) for _ in range(4)]

    def replica(pruner: Pruner) -> None:
        try:
            start.wait()
            idle = 0
            while idle < 5:  # a pass that met another replica's statement ends early
                report = pruner.prune()
                deleted.append((report.claims, report.events))
                idle = idle + 1 if report.deleted == 0 else 0
                if idle:
                    time.sleep(0.02)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=replica, args=(pruner,)) for pruner in pruners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    after = _sizes(backend)
    assert after["claims"] == before["claims"] - claims  # the seeded ones, every one once
    assert sum(c for c, _ in deleted) == claims
    assert after["run_events"] == before["run_events"] - 3 * (runs - unfinished)
    assert sum(e for _, e in deleted) == 3 * (runs - unfinished)
    [row] = db.execute("SELECT count(*) AS n FROM run_events WHERE type = 'run.seed'")
    assert row["n"] == 3 * unfinished  # every event of the running Runs is kept


def test_a_role_without_delete_is_told_once_and_nothing_is_pruned(pg_backend: PgBackend) -> None:
    backend = pg_backend
    backend.db.execute("REVOKE DELETE ON qinglong.trigger_schedule_claims, qinglong.run_events "
                       "FROM ql_runtime")
    pruner = _pruner(backend)
    with pytest.raises(PermissionDenied, match="retention migration"):
        pruner.prune()
    assert pruner.prune().deleted == 0  # said once; then idle


def test_zero_days_keeps_everything(backend: Backend) -> None:
    publish(backend)
    old = _carry_out(backend, "t1", 2)
    _age_runs(backend, old, 4000 * DAY_MS)
    report = _pruner(backend, days=0).prune()
    assert report.deleted == 0 and all(_events(backend, run_id) > 0 for run_id in old)
