"""Backfill, inside the store's transactions.

`read_target` and `runs_between` run in a read transaction; `admit_backfill` runs inside the
store's write transaction. An admission first looks for a Run standing for the occurrence (a scheduled Run
of any revision, or a backfilled one: then nothing is written), then re-reads every fact it
depends on -- the project is active; the trigger exists, is not deleted, is enabled and is
still at the revision the window was judged against; its task's current revision is enabled
and pinned by the trigger; the occurrence lies on the trigger's schedule and before its
cursor -- and inserts the rows `backfill_admission_rows` builds. A refusal raises before
anything is written. The definitions are read with run now's queries (``manual_*``).
"""

from __future__ import annotations

from qinglong.domain.admission import AdmissionIds
from qinglong.domain.backfill import (
    BackfillRequest,
    BackfillTarget,
    backfill_admission_rows,
    utc_text,
)
from qinglong.domain.task import TaskRevision
from qinglong.domain.trigger import TriggerRevision
from qinglong.errors import InvalidInput, NotRunnable, RecordCorrupt
from qinglong.storage.admission.params import BackfillAdmitParams, BackfillAdmitResult
from qinglong.storage.admission.requests import (
    active_project,
    check_pinned,
    enabled_task,
    enabled_trigger,
    execution_plan,
)
from qinglong.storage.admission.writes import insert_admission
from qinglong.storage.kernel import Tx


def _runnable(tx: Tx, project_id: str, trigger_id: str) -> tuple[TriggerRevision, TaskRevision]:
    """The trigger's current revision and its task's, as long as an admission may use them."""
    active_project(tx, project_id)
    trigger = enabled_trigger(tx, project_id, trigger_id)
    task = enabled_task(tx, project_id, trigger.task_id, of=f" of trigger {trigger_id}")
    check_pinned(trigger, task)
    return trigger, task


def _cursor(tx: Tx, project_id: str, trigger_id: str) -> int | None:
    row = tx.one("backfill_schedule",
                    {"project_id": project_id, "trigger_id": trigger_id})
    if row is None:
        raise RecordCorrupt(f"trigger {project_id}/{trigger_id} has no schedule row")
    return None if row["next_fire_at_ms"] is None else int(row["next_fire_at_ms"])


def read_target(tx: Tx, project_id: str, trigger_id: str, *,
                executor_type: str) -> BackfillTarget:
    """What a window is judged against; refused (writing nothing) as an admission would be."""
    trigger, task = _runnable(tx, project_id, trigger_id)
    execution_plan(tx, task, executor_type)
    return BackfillTarget(trigger=trigger, cursor_ms=_cursor(tx, project_id, trigger_id))


def runs_between(tx: Tx, project_id: str, trigger_id: str,
                 from_ms: int, to_ms: int) -> dict[int, str]:
    rows = tx.all("backfill_runs_between", {
        "project_id": project_id, "trigger_id": trigger_id, "from_ms": from_ms, "to_ms": to_ms})
    return {int(row["scheduled_for_ms"]): str(row["id"]) for row in rows}


def find_by_key(tx: Tx, request: BackfillRequest,
                occurrence_ms: int) -> str | None:
    """The Run a backfill admitted for this occurrence (None: none has)."""
    row = tx.one("backfill_run_by_key", {
        "project_id": request.project_id, "key": request.idempotency_key(occurrence_ms)})
    return None if row is None else str(row["id"])


def admit_backfill(tx: Tx, params: BackfillAdmitParams, *,
                   ids: AdmissionIds, now_ms: int, executor_type: str) -> BackfillAdmitResult:
    """Admit one occurrence (in the caller's transaction), or return the Run that already
    stands for it. ``now_ms`` is the commit time of the store's clock."""
    request, occurrence = params.request, params.occurrence_ms
    key = {"project_id": request.project_id, "trigger_id": request.trigger_id}
    existing = tx.one("backfill_run_at", {**key, "scheduled_for_ms": occurrence})
    if existing is not None:
        return BackfillAdmitResult(run_id=str(existing["id"]), admitted=False)
    trigger, task = _runnable(tx, request.project_id, request.trigger_id)
    if trigger.revision != params.trigger_revision:
        raise NotRunnable(
            f"{request.target} was published again (revision {trigger.revision}) after the "
            f"backfill judged its window against revision {params.trigger_revision}; run the "
            "backfill again to judge it against the new schedule")
    if not request.from_ms <= occurrence <= request.to_ms:
        raise InvalidInput("occurrence", f"{utc_text(occurrence)} is outside the window")
    if trigger.spec.schedule.first_at_or_after(occurrence) != occurrence:
        raise InvalidInput("occurrence", f"{utc_text(occurrence)} is not an occurrence of "
                                         f"{trigger.spec.expression!r} in {trigger.spec.timezone}")
    target = BackfillTarget(trigger=trigger,
                            cursor_ms=_cursor(tx, request.project_id,
                                              request.trigger_id))
    if occurrence >= target.horizon_ms:
        raise InvalidInput("to", f"must be before {target.horizon_text()}: occurrences from "
                                 "then on are the scheduler's to decide")
    execution = execution_plan(tx, task, executor_type)
    insert_admission(tx, backfill_admission_rows(
        request=request, occurrence_ms=occurrence, task=task, trigger=trigger,
        execution=execution, ids=ids, committed_at_ms=now_ms))
    return BackfillAdmitResult(run_id=ids.run_id, admitted=True)
