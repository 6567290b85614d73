"""Execution revisions: the exact plan an executor runs, compiled from one task revision
when it is published, with a SHA-256 digest of its own that is recomputed on every read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from qinglong.domain.canonical import canonical_json, content_digest, verify_digest
from qinglong.domain.command_spec import CommandSpec, parse_command_config
from qinglong.errors import InvalidInput, RecordCorrupt

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

    def plan_json(self) -> dict[str, object]:
        return self.plan.config_json(entry_kinds=False)

    def argv(self) -> list[str]:
        return self.plan.command.argv()


def _execution_content(
    *,
    project_id: str,
    task_id: str,
    source_revision: int,
    source_content_digest: str,
    executor_type: str,
    plan: CommandSpec,
) -> dict[str, object]:
    return {
        "projectId": project_id,
        "taskId": task_id,
        "taskRevision": execution_task_revision(source_revision, source_content_digest),
        "sourceRevision": source_revision,
        "sourceContentDigest": source_content_digest,
        "executorType": executor_type,
        "planSchema": EXECUTION_PLAN_SCHEMA,
        "plan": plan.config_json(entry_kinds=False),
    }


def compile_execution_revision(
    task: TaskRevision, executor_type: ExecutorType, created_at_ms: int
) -> ExecutionRevision:
    content = _execution_content(
        project_id=task.project_id,
        task_id=task.task_id,
        source_revision=task.revision,
        source_content_digest=task.content_digest,
        executor_type=executor_type.value,
        plan=task.spec,
    )
    return ExecutionRevision(
        project_id=task.project_id,
        task_id=task.task_id,
        source_revision=task.revision,
        source_content_digest=task.content_digest,
        task_revision=execution_task_revision(task.revision, task.content_digest),
        executor_type=executor_type,
        plan=task.spec,
        content_digest=content_digest(EXECUTION_DIGEST_PREFIX, content),
        created_at_ms=created_at_ms,
    )


def execution_revision_from_row(
    row: Mapping[str, object], plan_json: object
) -> ExecutionRevision:
    """Rebuild a stored execution revision and verify its digest and identity."""
    what = f"execution revision {row['project_id']}/{row['task_id']}@{row['source_revision']}"
    try:
        executor_type = ExecutorType(str(row["executor_type"]))
        plan = parse_command_config(plan_json)
        source_revision = int(row["source_revision"])  # type: ignore[call-overload]
        source_digest = str(row["source_content_digest"])
        content = _execution_content(
            project_id=str(row["project_id"]),
            task_id=str(row["task_id"]),
            source_revision=source_revision,
            source_content_digest=source_digest,
            executor_type=executor_type.value,
            plan=plan,
        )
    except (InvalidInput, ValueError, TypeError, KeyError) as exc:
        raise RecordCorrupt(f"{what} is malformed") from exc
    if row.get("plan_schema") != EXECUTION_PLAN_SCHEMA:
        raise RecordCorrupt(f"{what} has an unknown plan schema")
    if row.get("task_revision") != execution_task_revision(source_revision, source_digest):
        raise RecordCorrupt(f"{what} has a wrong task revision reference")
    verify_digest(str(row["content_digest"]), content_digest(EXECUTION_DIGEST_PREFIX, content), what)
    return ExecutionRevision(
        project_id=str(row["project_id"]),
        task_id=str(row["task_id"]),
        source_revision=source_revision,
        source_content_digest=source_digest,
        task_revision=str(row["task_revision"]),
        executor_type=executor_type,
        plan=plan,
        content_digest=str(row["content_digest"]),
        created_at_ms=int(row["created_at_ms"]),  # type: ignore[call-overload]
    )


def plan_json_text(revision: ExecutionRevision) -> str:
    return canonical_json(revision.plan_json())

