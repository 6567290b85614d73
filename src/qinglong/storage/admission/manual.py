"""Run now, inside the store's write transaction: the request's idempotency key is looked up
first (a request sent again returns the Run it admitted), then every fact the admission
depends on is re-read and checked (requests.py), and the Run is written by the one admission
writer. A refusal raises before anything is written.
"""

from __future__ import annotations

import json

from qinglong.domain.admission import AdmissionIds, manual_admission_rows
from qinglong.domain.manual import ManualRequest
from qinglong.domain.parameters import text as param_text
from qinglong.errors import RequestIdConflict
from qinglong.storage.admission.params import ManualRunResult
from qinglong.storage.admission.requests import (
    active_project,
    check_pinned,
    enabled_task,
    enabled_trigger,
    execution_plan,
)
from qinglong.storage.admission.writes import insert_admission
from qinglong.storage.kernel import Tx


def find_admitted(tx: Tx, request: ManualRequest) -> str | None:
    """The Run this request admitted before (None: none yet); RequestIdConflict when its
    request id admitted a Run for another target."""
    row = tx.one("manual_run_by_key",
                    {"project_id": request.project_id, "key": request.idempotency_key})
    if row is None:
        return None
    if not request.admitted(trigger_type=row["trigger_type"], task_id=row["task_id"],
                            trigger_id=row["trigger_id"]):
        what = (f"trigger {row['trigger_id']}" if row["trigger_id"] is not None
                else f"task {row['task_id']}")
        raise RequestIdConflict(
            f"request id {request.request_id!r} already admitted run {row['id']} for {what} in "
            f"project {request.project_id}, not for {request.target}; use a new request id")
    stored = json.loads(row["parameters"]) if row["parameters"] else {}
    differ = sorted(name for name, value in request.parameters.items()
                    if name not in stored or param_text(stored[name]) != param_text(value))
    if differ:
        raise RequestIdConflict(
            f"request id {request.request_id!r} already admitted run {row['id']} with other "
            f"parameter values ({differ[0]}); use a new request id")
    return str(row["id"])


def admit_manual(tx: Tx, request: ManualRequest, *,
                 ids: AdmissionIds, now_ms: int, executor_type: str) -> ManualRunResult:
    """Admit the manual Run ``request`` asks for (in the caller's transaction), or return the
    one it admitted before. ``now_ms`` is the commit time of the store's clock."""
    existing = find_admitted(tx, request)
    if existing is not None:
        return ManualRunResult(run_id=existing, admitted=False)
    active_project(tx, request.project_id)
    instead = " (or run its task with `ql task run`)"
    trigger = (enabled_trigger(tx, request.project_id, request.trigger_id, instead=instead)
               if request.trigger_id is not None else None)
    task_id = trigger.task_id if trigger is not None else request.task_id
    assert task_id is not None
    task = enabled_task(tx, request.project_id, task_id)
    if trigger is not None:
        check_pinned(trigger, task, instead=instead)
    execution = execution_plan(tx, task, executor_type)
    insert_admission(tx, manual_admission_rows(
        request=request, task=task, trigger=trigger, execution=execution, ids=ids,
        committed_at_ms=now_ms))
    return ManualRunResult(run_id=ids.run_id, admitted=True)
