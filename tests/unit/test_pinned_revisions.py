"""The committer's cache of the task and execution revisions a batch pins (admission/pinned.py):
what it keeps, what it refuses to keep, and its bound."""

from __future__ import annotations

from typing import Any

import pytest

from qinglong.domain.command_spec import ArgvCommand
from qinglong.domain.execution_revision import (
    EXECUTION_PLAN_SCHEMA,
    ExecutorType,
    compile_execution_revision,
    plan_json_text,
)
from qinglong.domain.task import CommandSpec, new_task_revision, spec_json_text
from qinglong.errors import RecordCorrupt
from qinglong.storage.admission.pinned import PinnedRevisions

WORKER = ExecutorType.REMOTE_WORKER.value


def facts_row(task: str = "t1", revision: int = 1, *, command: str = "/bin/true",
              with_execution: bool = True) -> dict[str, Any]:
    """A row of schedule_facts_batch that brings a task revision and its plan."""
    spec = CommandSpec(command=ArgvCommand(file=command, args=()))
    kept = new_task_revision(project="demo", task=task, revision=revision, name=task,
                             spec=spec, enabled=True, created_at_ms=1_000)
    plan = compile_execution_revision(kept, ExecutorType.REMOTE_WORKER, 2_000)
    row: dict[str, Any] = {
        "project_id": "demo", "k_task_id": task, "k_revision": revision, "k_name": task,
        "k_kind": kept.kind, "k_spec_json": spec_json_text(spec), "k_enabled": True,
        "k_content_digest": kept.content_digest, "k_created_at_ms": 1_000,
    }
    execution = {
        "e_project_id": "demo", "e_task_id": task, "e_source_revision": revision,
        "e_source_content_digest": plan.source_content_digest,
        "e_task_revision": plan.task_revision, "e_executor_type": WORKER,
        "e_plan_schema": EXECUTION_PLAN_SCHEMA, "e_plan_json": plan_json_text(plan),
        "e_content_digest": plan.content_digest, "e_created_at_ms": 2_000,
    }
    row.update(execution if with_execution else dict.fromkeys(execution))
    return row


def test_a_verified_pair_is_known_to_later_batches() -> None:
    pinned = PinnedRevisions()
    key = ("demo", "t1", 1, WORKER)
    assert pinned.known([key]) == {}
    task, execution = pinned.verify(key, facts_row())
    assert (task.task_id, task.revision) == ("t1", 1)
    assert not isinstance(execution, RecordCorrupt)
    assert execution.source_content_digest == task.content_digest
    assert pinned.known([key, ("demo", "t2", 1, WORKER)]) == {key: (task, execution)}


def test_a_missing_plan_is_kept_as_the_error_and_not_remembered() -> None:
    pinned = PinnedRevisions()
    key = ("demo", "t1", 1, WORKER)
    task, execution = pinned.verify(key, facts_row(with_execution=False))
    assert task.task_id == "t1"
    assert isinstance(execution, RecordCorrupt) and "missing" in execution.message
    assert pinned.known([key]) == {}  # read again next time


@pytest.mark.parametrize("change", ["k_spec_json", "e_plan_json"])
def test_a_tampered_revision_is_refused(change: str) -> None:
    row = facts_row()
    row[change] = row[change].replace("/bin/true", "/bin/false")
    pinned = PinnedRevisions()
    key = ("demo", "t1", 1, WORKER)
    if change == "k_spec_json":
        with pytest.raises(RecordCorrupt):
            pinned.verify(key, row)
    else:
        assert isinstance(pinned.verify(key, row)[1], RecordCorrupt)
    assert pinned.known([key]) == {}


def test_a_row_of_another_task_revision_is_refused() -> None:
    with pytest.raises(RecordCorrupt, match="came back as another"):
        PinnedRevisions().verify(("demo", "t1", 2, WORKER), facts_row(revision=1))
    with pytest.raises(RecordCorrupt, match="is missing"):
        PinnedRevisions().verify(("demo", "t1", 1, WORKER), {"k_revision": None})


def test_a_plan_for_another_executor_is_not_used() -> None:
    local = ExecutorType.LOCAL_PROCESS.value
    _, execution = PinnedRevisions().verify(("demo", "t1", 1, local), facts_row())
    assert isinstance(execution, RecordCorrupt) and local in execution.message


def test_the_cache_is_bounded_and_keeps_the_most_recently_used() -> None:
    pinned = PinnedRevisions(size=2)
    keys = [("demo", f"t{i}", 1, WORKER) for i in range(3)]
    for key in keys[:2]:
        pinned.verify(key, facts_row(key[1]))
    assert set(pinned.known([keys[0]])) == {keys[0]}  # used: now the most recent
    pinned.verify(keys[2], facts_row("t2"))
    assert set(pinned.known(keys)) == {keys[0], keys[2]}
