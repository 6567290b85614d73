"""The occurrence ledger (`ql trigger ledger`) on SQLite and PostgreSQL: the facts read by
``RunStore.trigger_ledger_facts`` (as ql_runtime on PostgreSQL) and the fates the
service gives each nominal occurrence after the scheduler decided them --
admitted, dropped by a misfire, held back by a pause, archived, superseded by a new
revision, a duplicate, or not decided yet.

The trigger fires every second (every 5 s in the misfire case, so that the re-claim after the
misfire is on time even on a slow machine); its first revision is moved back in time (its
publish time is not part of its digest) so that the window holds occurrences the scheduler
can misfire.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from qinglong.domain.decision import PAUSED_FATE
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import InvalidInput, NotFound
from qinglong.service.ledger import TriggerLedger
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPauseParams,
    TriggerPublishParams,
    TriggerResumeParams,
)
from qinglong.storage.runs.params import RunListParams
from tests.contract.conftest import EVERY_5_S, Backend, misfired_cursor

SECOND = 1_000


def _bed(backend: Backend, expression: str) -> Backend:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="hello",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    d.trigger_publish(TriggerPublishParams(project_id="demo", trigger_id="tick", task_id="hello",
                                           expression=expression, timezone="UTC",
                                           misfire_policy="skip"))
    return backend


@pytest.fixture
def bed(backend: Backend) -> Backend:
    return _bed(backend, "* * * * * *")


@pytest.fixture
def bed_every_5_s(backend: Backend) -> Backend:
    """``tick`` fires every 5 s: a misfire's re-claim in the same cycle has seconds to spare."""
    return _bed(backend, EVERY_5_S)


def rows(b: Backend, sql: str, *params: object) -> list[dict[str, Any]]:
    """As the database owner (test-only reads and tampering)."""
    return b.sql(sql, *params)


def backdate(b: Backend, ms: int) -> int:
    """Move revision 1's publish time ``ms`` before the whole second it was published in."""
    [row] = rows(b, "SELECT created_at_ms FROM trigger_revisions "
                    "WHERE trigger_id = 'tick' AND revision = 1")
    return publish_time(b, int(row["created_at_ms"]) // SECOND * SECOND - ms)


def publish_time(b: Backend, at: int) -> int:
    """Move revision 1's publish time to ``at`` (in the past)."""
    rows(b, "UPDATE trigger_revisions SET created_at_ms = ? "
            "WHERE trigger_id = 'tick' AND revision = 1", at)
    return at


def cycle(b: Backend) -> None:
    b.run_cycle(lambda: str(uuid.uuid4()), lambda _item, _decision, _result: None)


def runs_by_time(b: Backend) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for run in b.runs.run_list(RunListParams(project_id="demo", trigger_id="tick", limit=1000)):
        assert run.scheduled_for_ms is not None
        found.setdefault(run.scheduled_for_ms, []).append(run.id)
    return found


def cursor(b: Backend) -> int:
    [row] = rows(b, "SELECT next_fire_at_ms FROM trigger_schedules WHERE trigger_id = 'tick'")
    return int(row["next_fire_at_ms"])


def ledger(b: Backend, from_ms: int, to_ms: int | None = None, *,
           now_ms: int | None = None) -> dict[str, Any]:
    return TriggerLedger(b.runs).ledger("demo", "tick", now_ms=now_ms or b.now_ms(),
                                        from_ms=from_ms, to_ms=to_ms, limit=10_000).to_json()


def fates(view: dict[str, Any]) -> dict[int, str]:
    return {o["at_ms"]: o["fate"] for o in view["occurrences"]}


def seconds(low: int, high: int, step: int = SECOND) -> range:
    """Whole seconds (or every ``step``) from ``low`` through ``high``."""
    first = -(-low // step) * step
    return range(first, high + 1, step)


def test_a_misfire_then_on_time_admissions_then_what_is_not_decided_yet(
        bed_every_5_s: Backend) -> None:
    b = bed_every_5_s
    step = 5 * SECOND
    # Two minutes late, read just past an occurrence; revision 1 is published at the cursor.
    start = publish_time(b, misfired_cursor(b))
    b.set_cursor("demo", "tick", start)
    cycle(b)  # 120 s late: skip drops the backlog, then admits what is within the grace
    [record] = rows(b, "SELECT due_at_ms, skipped_through_ms, policy FROM "
                       "trigger_schedule_misfires WHERE trigger_id = 'tick'")
    assert record["due_at_ms"] == start and record["policy"] == "skip"
    through = int(record["skipped_through_ms"])
    admitted = runs_by_time(b)
    assert admitted and min(admitted) > through and through - start >= 85 * SECOND
    undecided = cursor(b)
    now = b.now_ms()
    view = ledger(b, start, now_ms=now)
    got = fates(view)
    expected: dict[int, str] = {}
    for at in seconds(start, now, step):
        if at <= through:
            expected[at] = "skipped"
        elif at in admitted:
            expected[at] = "ran"
        else:
            assert at >= undecided
            expected[at] = "due"
    upcoming = sorted(t for t in got if t > now)
    assert upcoming == list(seconds(now + 1, now + 3 * step, step))[:3]
    for at in upcoming:  # pending, or due if the store's clock has reached it meanwhile
        assert got.pop(at) in ("pending", "due")
    assert got == expected
    first = min(admitted)
    [entry] = [o for o in view["occurrences"] if o["at_ms"] == first]
    assert entry["runs"] == [{"id": admitted[first][0], "status": "queued", "type": "cron"}]
    assert entry["revision"] == 1 and entry["local"].endswith("+00:00")
    assert view["not_shown"] == 0 and view["counts"]["skipped"] == through // step - start // step + 1


def test_a_pause_holds_occurrences_back_and_the_resume_runs_the_one_in_progress(
        bed: Backend) -> None:
    b = bed
    backdate(b, 10 * SECOND)
    first = b.now_ms() // SECOND * SECOND - 2 * SECOND
    b.set_cursor("demo", "tick", first)
    cycle(b)  # on time: first up to now
    view = b.definitions.trigger_pause(TriggerPauseParams(project_id="demo", trigger_id="tick",
                                                          actor="tester"))
    began = view.schedule.pause.from_ms  # type: ignore[union-attr]
    b.pass_time(2_500)
    cycle(b)  # held: nothing decided
    resumed = b.definitions.trigger_resume(TriggerResumeParams(project_id="demo",
                                                               trigger_id="tick", actor="tester"))
    ended = resumed.schedule.pause.until_ms  # type: ignore[union-attr]
    assert ended is not None
    cycle(b)  # what the pause held back is recorded; the occurrence in progress runs
    held = rows(b, "SELECT due_at_ms, skipped_through_ms FROM trigger_schedule_misfires "
                   "WHERE trigger_id = 'tick' AND policy = ?", PAUSED_FATE)
    assert held, "a 2.5 s pause of a trigger firing every second holds something back"
    in_progress = ended // SECOND * SECOND
    admitted = runs_by_time(b)
    got = fates(ledger(b, first, ended))
    assert set(got) == set(seconds(first, ended))
    for at, fate in got.items():
        if at in admitted:
            assert fate == "ran", at
        else:
            assert fate == "paused" and began <= at < ended, at
    assert got[in_progress] == "ran" and got[first] == "ran"
    assert sorted(at for at, fate in got.items() if fate == "paused") == list(seconds(
        int(held[0]["due_at_ms"]), int(held[0]["skipped_through_ms"])))


def test_a_new_revision_an_archival_and_a_duplicate(bed: Backend) -> None:
    b = bed
    start = backdate(b, 120 * SECOND)
    first = b.now_ms() // SECOND * SECOND - 2 * SECOND
    b.set_cursor("demo", "tick", first)
    cycle(b)  # revision 1 admits first .. now
    b.pass_time(1_500)
    second = b.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="tick", expression="*/2 * * * * *")).revision
    republished = second.created_at_ms
    # A second Run for the first occurrence (the database refuses one by key: moved by hand).
    moved = runs_by_time(b)[first + SECOND][0]
    rows(b, "UPDATE runs SET scheduled_for_ms = ? WHERE id = ?", first, moved)
    b.pass_time(2_100)
    b.definitions.project_archive("demo")
    [archival] = rows(b, "SELECT archived_at_ms FROM project_archivals WHERE project_id = 'demo'")
    archived = int(archival["archived_at_ms"])
    b.pass_time(2_100)
    now = b.now_ms()
    view = ledger(b, start, now_ms=now)
    admitted = runs_by_time(b)
    expected: dict[int, str] = {}
    for at in seconds(start, republished - 1):  # revision 1: every second
        if at == first:
            expected[at] = "duplicate"
        elif at in admitted:
            expected[at] = "ran"
        elif republished - at <= 60 * SECOND:
            expected[at] = "superseded"  # never decided before revision 2 replaced it
        else:
            expected[at] = "missing"  # the cursor was moved past it by hand
    evens = list(seconds(republished, now + 6 * SECOND, 2 * SECOND))
    for at in evens[:len([t for t in evens if t <= now]) + 3]:  # revision 2, then 3 upcoming
        expected[at] = "archived" if at >= archived else "due"
    got = fates(view)
    assert got == expected
    assert {"due", "archived", "superseded", "missing", "duplicate", "ran"} <= set(got.values())
    [duplicate] = [o for o in view["occurrences"] if o["at_ms"] == first]
    assert sorted(r["id"] for r in duplicate["runs"]) == sorted(admitted[first])
    assert len(duplicate["runs"]) == 2 and duplicate["revision"] == 1
    revisions = {o["revision"] for o in view["occurrences"] if o["at_ms"] >= republished}
    assert revisions == {2}


def test_unknown_names_and_bad_windows_are_refused(bed: Backend) -> None:
    b = bed
    now = b.now_ms()
    with pytest.raises(NotFound):
        b.runs.trigger_ledger_facts("demo", "nope", now - 1000, now)
    with pytest.raises(NotFound):
        b.runs.trigger_ledger_facts("nope", "tick", now - 1000, now)
    with pytest.raises(InvalidInput):
        b.runs.trigger_ledger_facts("demo", "tick", now, now - 1000)
    facts = b.runs.trigger_ledger_facts("demo", "tick", now - 1000, now)
    assert [r.revision for r in facts.revisions] == [1]
    assert facts.cursor is not None and facts.cursor.trigger_revision == 1
    assert facts.runs == () and facts.misfires == () and facts.pauses == ()
    assert abs(facts.now_ms - b.now_ms()) < 60_000
