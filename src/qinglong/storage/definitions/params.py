"""The verbs' parameters and results of the definition store (storage/definitions)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from qinglong.domain.task import CommandSpec, TaskRevision
from qinglong.domain.trigger import Overlap, TriggerRevision


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectCreateParams:
    project_id: str
    name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPublishParams:
    project_id: str
    task_id: str
    name: str
    spec: CommandSpec
    enabled: bool = True
    repin_triggers: bool = True
    expected_revision: int | None = None  # compare-and-set: refuse if the task moved on


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPublishResult:
    revision: TaskRevision
    created: bool
    repinned_triggers: tuple[str, ...] = ()
    restored: bool = False  # the task had been deleted


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerPublishParams:
    project_id: str
    trigger_id: str
    task_id: str | None = None  # None: keep the current task (only for an existing trigger)
    expression: str | None = None  # None: keep the current value (each of these three)
    timezone: str | None = None
    misfire_policy: str | None = None
    overlap: Overlap | None = None
    enabled: bool | None = True  # None: keep (a new or deleted trigger is enabled)
    dst_gap: str | None = None  # shift | skip (a wall-clock cron trigger's DST policy)
    dst_overlap: str | None = None  # first | second | both
    jitter_s: int | None = None  # the jitter's bound; 0: no jitter
    jitter_random_s: int | None = None  # the part of it drawn per occurrence
    parameters: Mapping[str, object] | None = None  # values it gives ({}: none; None: keep)
    flow: str | None = None  # a new trigger starts this flow (task: one of its tasks)


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerPublishResult:
    revision: TriggerRevision
    created: bool
    restored: bool = False  # the trigger had been deleted


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerPauseParams:
    project_id: str
    trigger_id: str
    actor: str  # who asked (kept with the pause)
    until_ms: int | None = None  # None: until resumed; else an instant after now
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerResumeParams:
    project_id: str
    trigger_id: str
    actor: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectPauseParams:
    """Pause (or resume, ``until_ms`` and ``reason`` unused) every trigger of a project."""

    project_id: str
    actor: str
    until_ms: int | None = None
    reason: str | None = None
