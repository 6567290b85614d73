"""A plan: what applying definitions would write, one :class:`Change` per project, task and
trigger, in the order the writes happen."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from qinglong.domain.flow import FlowDocument
from qinglong.errors import OutcomeUnknown, QinglongError
from qinglong.service.definition_fields import FieldChange
from qinglong.service.definition_model import Where
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)

# --- plans ---------------------------------------------------------------------------


class Action(StrEnum):
    CREATE = "create"
    CHANGE = "change"
    RESTORE = "restore"  # it had been deleted
    ENABLE = "enable"
    DISABLE = "disable"
    UNCHANGED = "unchanged"
    KEPT = "kept"  # stored, enabled, not in the files, and no --prune: left as it is


# Writes in this order, per project: create the project; stop the triggers that end up
# disabled (before their tasks change, so none fires a task revision it should not); publish
# the tasks (their triggers are re-pinned with them); publish the flows (definition_flows:
# they pin the tasks' new revisions); then the other triggers (a trigger may start a flow of
# the same file).
PHASE_PROJECT, PHASE_STOP_TRIGGERS, PHASE_TASKS, PHASE_FLOWS, PHASE_TRIGGERS = range(5)



@dataclass(frozen=True, slots=True)
class FlowPublishParams:
    """Publish a flow (definition_flows.py) into its project."""

    project_id: str
    document: FlowDocument


WriteParams = ProjectCreateParams | TaskPublishParams | TriggerPublishParams | FlowPublishParams


@dataclass(slots=True, kw_only=True)
class Change:
    kind: str  # project | task | trigger | flow
    project_id: str
    item_id: str
    action: Action
    fields: tuple[FieldChange, ...] = ()
    pruned: bool = False  # disabled by --prune: no longer in the files
    where: Where | None = None
    phase: int = PHASE_TASKS
    params: WriteParams | None = None  # None: nothing to write
    revision: int | None = None  # stored now (plan), or written (apply)
    repinned: tuple[str, ...] = ()  # triggers the store re-pinned with a task
    written: bool = False

    @property
    def label(self) -> str:
        return self.project_id if self.kind == "project" else f"{self.project_id}/{self.item_id}"


@dataclass(slots=True)
class Plan:
    changes: list[Change]

    @property
    def writes(self) -> list[Change]:
        return [c for c in self.changes if c.params is not None]

    def counts(self) -> dict[str, int]:
        counts = {action.value: 0 for action in Action}
        for change in self.changes:
            if change.kind != "project" or change.action is not Action.UNCHANGED:
                counts[change.action.value] += 1
        return counts


class ApplyStopped(Exception):
    """A project's write failed (only what changed since the plan can do this): that project
    wrote nothing, the projects before it did. ``in_doubt``: the database's reply to the
    project's COMMIT was lost, so whether it was written is unknown (applying again settles
    it: it writes only what still differs)."""

    def __init__(self, change: Change, cause: QinglongError, plan: Plan) -> None:
        self.change = change
        self.cause = cause
        self.in_doubt = isinstance(cause, OutcomeUnknown)
        self.written = [c for c in plan.writes if c.written]
        self.not_written = [c for c in plan.writes if not c.written]
        super().__init__(f"apply stopped at {change.kind} {change.label}: {cause.message}")


_SPEC_FIELDS = {  # domain field names -> the file's keys
    "working-directory": "cwd", "timeout": "timeout", "concurrency": "concurrency",
    "requires": "requires", "parameters": "parameters", "limits": "limits", "memory-limit": "limits", "cpu-limit": "limits",
    "idempotent": "idempotent", "environment": "env", "retry": "retry",
    "command": "command", "command.command": "shell", "command.shell": "bash",
    "command.file": "argv", "command.args": "argv",
}


def spec_key(domain_field: str) -> str:
    base = domain_field.split("[", 1)[0]
    if base.startswith("environment."):
        return "env." + base.split(".", 1)[1]
    return _SPEC_FIELDS.get(base, base)


def action_of(fields: Sequence[FieldChange], *, deleted: bool) -> Action:
    if deleted:
        return Action.RESTORE
    if not fields:
        return Action.UNCHANGED
    if [f.field for f in fields] == ["enabled"]:
        return Action.ENABLE if fields[0].after else Action.DISABLE
    return Action.CHANGE

