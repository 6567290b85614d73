"""(Needs the plumbing in /tmp/trig-requests/plumbing.diff.) `ql audit` and the ledger judge a
jittered trigger at its jittered instants: a standalone scheduler under a fake clock runs an
interval trigger with jitter for two hours and the audit finds every occurrence admitted, none
before it was due, its lags counted from the jittered instant; a Run made to look admitted
before its jittered instant, or a misfire decided within the grace of the jittered instant, is
a violation; the ledger shows each occurrence's jittered instant."""

from __future__ import annotations

import uuid

import pytest

from qinglong.audit.model import AuditParams
from qinglong.domain.interval import IntervalSchedule, ceil_second
from qinglong.domain.jitter import Jitter
from qinglong.domain.occurrences import instant_text
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.profiles.audit_backend import run_audit
from qinglong.scheduler.coordinator import Coordinator
from qinglong.service.ledger import TriggerLedger
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.testing import FakeClock
from tests.conftest import SqliteStores

MINUTE = 60_000


@pytest.fixture
def ran(sqlite_stores: SqliteStores, clock: FakeClock) -> tuple[SqliteStores, int]:
    d = sqlite_stores.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="hello",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    anchor = ceil_second(clock.now_ms()) + MINUTE
    d.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="spread", task_id="hello",
        expression=f"every 10m from {instant_text(anchor)}", jitter_s=300, jitter_random_s=60))
    coordinator = Coordinator(sqlite_stores.schedules, owner="standalone:1",
                              new_id=lambda: str(uuid.uuid4()))
    end = anchor + 120 * MINUTE
    while clock.now_ms() < end:
        coordinator.run_cycle()
        clock.advance(5_000)
    return sqlite_stores, anchor


def audit(stores: SqliteStores, clock: FakeClock, start: int, end: int):  # type: ignore[no-untyped-def]
    report = run_audit(f"sqlite:///{stores.path}", clock,
                       AuditParams(start_ms=start, end_ms=end, settle_ms=0, project_id="demo"))
    [found] = report.triggers
    return found


def test_the_audit_judges_at_the_jittered_instants(ran: tuple[SqliteStores, int],
                                                   clock: FakeClock) -> None:
    stores, anchor = ran
    due = Jitter(300, 60).delay(IntervalSchedule(600, anchor, "UTC"), "demo", "spread").due
    found = audit(stores, clock, anchor, anchor + 110 * MINUTE)
    assert found.violations == 0, found
    # 12 nominal occurrences in the window; the last is due (jittered) after its end
    assert due(anchor + 110 * MINUTE) > anchor + 110 * MINUTE
    assert found.expected == found.admitted == 11
    assert all(0 <= lag <= 5_000 for lag in found.lags_ms)  # counted from the jittered instant
    conn = stores.db.connection()
    # a Run that looks admitted before its jittered instant is a violation
    conn.execute("UPDATE runs SET created_at_ms = scheduled_for_ms WHERE scheduled_for_ms = ?",
                 (anchor,))
    assert due(anchor) > anchor
    early = audit(stores, clock, anchor, anchor + 110 * MINUTE)
    assert early.misfire_violations == [f"admitted-before-due@{anchor}"]
    # a misfire record decided within the grace of the jittered instant is a violation
    conn.execute("INSERT INTO trigger_schedule_misfires (project_id, trigger_id, "
                 "trigger_revision, due_at_ms, skipped_through_ms, next_fire_at_ms, policy, "
                 "run_id, decided_at_ms) VALUES ('demo', 'spread', 1, ?, ?, ?, 'skip', NULL, ?)",
                 (anchor + 10 * MINUTE, anchor + 20 * MINUTE - 1, anchor + 20 * MINUTE,
                  due(anchor + 10 * MINUTE) + 10_000))
    misfired = audit(stores, clock, anchor + MINUTE, anchor + 110 * MINUTE)
    assert f"misfire-not-late@{anchor + 10 * MINUTE}" in misfired.misfire_violations


def test_the_ledger_shows_the_jittered_instants(ran: tuple[SqliteStores, int],
                                                clock: FakeClock) -> None:
    stores, anchor = ran
    view = TriggerLedger(stores.runs).ledger("demo", "spread", now_ms=clock.now_ms(),
                                             from_ms=anchor, to_ms=anchor + 110 * MINUTE)
    entries = sorted(view.to_json()["occurrences"], key=lambda o: o["at_ms"])
    assert [o["fate"] for o in entries] == ["ran"] * 12
    offsets = [o["due_at_ms"] - o["at_ms"] for o in entries]
    assert all(0 <= off <= 300_000 for off in offsets) and len(set(offsets)) > 1
