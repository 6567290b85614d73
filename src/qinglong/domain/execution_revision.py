"""Execution revisions: the exact plan an executor runs, compiled from one task revision
when it is published, with a SHA-256 digest of its own that is recomputed on every read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from qinglong.domain.canonical import canonical_json, rebuild_verified, sealed
from qinglong.domain.command_spec import CommandSpec, parse_command_config
from qinglong.errors import RecordCorrupt

if TYPE_CHECKING:
    from qinglong.domain.task import TaskRevision

EXECUTION_DIGEST_PREFIX = "qinglong.task-execution-revision.v1"
EXECUTION_PLAN_SCHEMA = "qinglong/command-execution@v1"


class ExecutorType(StrEnum):
    LOCAL_PROCESS = "local_process"
    REMOTE_WORKER = "remote_worker"


def execution_task_revision(source_revision: int, source_digest: str) -> str:
    return f"qltd:v1:{source_revision}:{source_digest}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionRevision:
    """The digest-verified plan an executor runs, compiled from one task revision."""

    project_id: str
    task_id: str
    source_revision: int
    source_content_digest: str
    task_revision: str
    executor_type: ExecutorType
    plan: CommandSpec
    content_digest: str
    created_at_ms: int
    plan_schema: str = EXECUTION_PLAN_SCHEMA

    def content(self) -> dict[str, object]:
        return {
            "projectId": self.project_id,
            "taskId": self.task_id,
            "taskRevision": self.task_revision,
            "sourceRevision": self.source_revision,
            "sourceContentDigest": self.source_content_digest,
            "executorType": self.executor_type.value,
            "planSchema": EXECUTION_PLAN_SCHEMA,
            "plan": self.plan_json(),
        }

    def plan_json(self) -> dict[str, object]:
        return self.plan.config_json(entry_kinds=False)

    def argv(self) -> list[str]:
        return self.plan.command.argv()


def _new_execution_revision(*, project: str, task: str, source_revision: int, source_digest: str,
                            executor_type: ExecutorType, plan: CommandSpec,
                            created_at_ms: int) -> ExecutionRevision:
    return sealed(ExecutionRevision(
        project_id=project, task_id=task, source_revision=source_revision,
        source_content_digest=source_digest,
        task_revision=execution_task_revision(source_revision, source_digest),
        executor_type=executor_type, plan=plan, content_digest="", created_at_ms=created_at_ms,
    ), EXECUTION_DIGEST_PREFIX)


def compile_execution_revision(
    task: TaskRevision, executor_type: ExecutorType, created_at_ms: int
) -> ExecutionRevision:
    return _new_execution_revision(
        project=task.project_id, task=task.task_id, source_revision=task.revision,
        source_digest=task.content_digest, executor_type=executor_type, plan=task.spec,
        created_at_ms=created_at_ms)


def execution_revision_from_row(
    row: Mapping[str, object], plan_json: object
) -> ExecutionRevision:
    """Rebuild a stored execution revision and verify its digest and identity."""
    what = f"execution revision {row['project_id']}/{row['task_id']}@{row['source_revision']}"
    if row.get("plan_schema") != EXECUTION_PLAN_SCHEMA:
        raise RecordCorrupt(f"{what} has an unknown plan schema")
    revision = rebuild_verified(what, row, lambda: _new_execution_revision(
        project=str(row["project_id"]),
        task=str(row["task_id"]),
        source_revision=int(row["source_revision"]),  # type: ignore[call-overload]
        source_digest=str(row["source_content_digest"]),
        executor_type=ExecutorType(str(row["executor_type"])),
        plan=parse_command_config(plan_json),
        created_at_ms=int(row["created_at_ms"]),  # type: ignore[call-overload]
    ))
    if row.get("task_revision") != revision.task_revision:
        raise RecordCorrupt(f"{what} has a wrong task revision reference")
    return revision


def plan_json_text(revision: ExecutionRevision) -> str:
    return canonical_json(revision.plan_json())

