"""Task definitions: task revisions of the `qinglong/command@v1` spec.

A task revision is immutable and carries a SHA-256 content digest over its canonical
JSON. Publishing it also compiles an execution revision: the exact plan an executor
runs, with its own digest. Both digests are recomputed on every read.

The spec itself is in ``domain/command_spec.py`` and execution revisions are in
``domain/execution_revision.py``; their public names are importable from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from qinglong.domain.canonical import canonical_json, rebuild_verified, sealed
from qinglong.domain.command_spec import (
    ALLOWED_SHELLS,
    DEFAULT_TIMEOUT_MS,
    MAX_ARGS,
    MAX_COMMAND_BYTES,
    MAX_CONCURRENCY,
    MAX_ENV_BYTES,
    MAX_ENV_ENTRIES,
    MAX_PATH_BYTES,
    MAX_TIMEOUT_MS,
    MIN_TIMEOUT_MS,
    TASK_SPEC_SCHEMA,
    ArgvCommand,
    Command,
    CommandSpec,
    DepsInstallCommand,
    RepoPullCommand,
    ScriptCommand,
    ShellCommand,
    parse_command_config,
    parse_task_envelope,
)
from qinglong.domain.execution_revision import (
    EXECUTION_DIGEST_PREFIX,
    EXECUTION_PLAN_SCHEMA,
    ExecutionRevision,
    ExecutorType,
    compile_execution_revision,
    execution_revision_from_row,
    execution_task_revision,
    plan_json_text,
)
from qinglong.domain.identifiers import display_name, entity_id, project_id
from qinglong.domain.task_env import (
    ENV_NAME,
    RESERVED_ENV_PREFIX,
    EnvEntry,
    environment_from_pairs,
)
from qinglong.errors import InvalidInput, RecordCorrupt

# The spec, execution revisions and environment entries live in their own modules; these
# names are imported from here too.
__all__ = [
    "ALLOWED_SHELLS", "DEFAULT_TIMEOUT_MS", "ENV_NAME", "EXECUTION_DIGEST_PREFIX",
    "EXECUTION_PLAN_SCHEMA", "MAX_ARGS", "MAX_COMMAND_BYTES", "MAX_CONCURRENCY",
    "MAX_ENV_BYTES", "MAX_ENV_ENTRIES", "MAX_PATH_BYTES", "MAX_REVISION", "MAX_TIMEOUT_MS",
    "MIN_TIMEOUT_MS", "RESERVED_ENV_PREFIX", "TASK_DIGEST_PREFIX", "TASK_KIND",
    "TASK_SPEC_SCHEMA", "ArgvCommand", "Command", "CommandSpec", "DepsInstallCommand", "EnvEntry",
    "ExecutionRevision", "ExecutorType", "RepoPullCommand", "ScriptCommand", "ShellCommand", "TaskRevision", "check_revision",
    "compile_execution_revision", "environment_from_pairs", "execution_revision_from_row",
    "execution_task_revision", "new_task_revision", "parse_command_config",
    "parse_task_envelope", "plan_json_text", "spec_json_text", "task_revision_from_row",
]

TASK_KIND = "command"
TASK_DIGEST_PREFIX = "qinglong.task-definition.v1"
MAX_REVISION = 2**31 - 1


def check_revision(value: object, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_REVISION:
        raise InvalidInput(field, f"must be an integer between 1 and {MAX_REVISION}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRevision:
    """One immutable revision of a task definition."""

    project_id: str
    task_id: str
    revision: int
    name: str
    spec: CommandSpec
    enabled: bool
    content_digest: str
    created_at_ms: int
    kind: str = TASK_KIND

    def content(self) -> dict[str, object]:
        return {
            "projectId": self.project_id,
            "taskId": self.task_id,
            "revision": self.revision,
            "name": self.name,
            "kind": TASK_KIND,
            "spec": self.spec.envelope(),
            "enabled": self.enabled,
        }

    def same_definition(self, other: TaskRevision) -> bool:
        """True when both revisions define the same task (revision number aside)."""
        return (self.name, self.spec, self.enabled) == (other.name, other.spec, other.enabled)


def new_task_revision(
    *,
    project: str,
    task: str,
    revision: int,
    name: str,
    spec: CommandSpec,
    enabled: bool,
    created_at_ms: int,
) -> TaskRevision:
    project_id(project)
    entity_id(task, "task")
    check_revision(revision, "revision")
    display_name(name)
    return sealed(TaskRevision(project_id=project, task_id=task, revision=revision, name=name,
                               spec=spec, enabled=enabled, content_digest="",
                               created_at_ms=created_at_ms), TASK_DIGEST_PREFIX)


def task_revision_from_row(row: Mapping[str, object], spec_envelope: object) -> TaskRevision:
    """Rebuild a stored task revision and verify its digest (RecordCorrupt if it fails)."""
    what = f"task revision {row['project_id']}/{row['task_id']}@{row['revision']}"
    if row.get("kind") != TASK_KIND:
        raise RecordCorrupt(f"{what} has an unknown kind")
    return rebuild_verified(what, row, lambda: new_task_revision(
        spec=parse_task_envelope(spec_envelope),
        project=str(row["project_id"]),
        task=str(row["task_id"]),
        revision=int(row["revision"]),  # type: ignore[call-overload]
        name=str(row["name"]),
        enabled=bool(row["enabled"]),
        created_at_ms=int(row["created_at_ms"]),  # type: ignore[call-overload]
    ))


def spec_json_text(spec: CommandSpec) -> str:
    return canonical_json(spec.envelope())
