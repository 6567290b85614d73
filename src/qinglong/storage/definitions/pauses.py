"""Pausing and resuming triggers and projects (inside a write transaction of the store).

A pause is recorded on the trigger (who, why, until when) and copied onto its schedule row,
which the scheduler reads: what the pause holds back is decided when it ends.
"""

from __future__ import annotations

from qinglong.domain.identifiers import actor_name, project_id
from qinglong.domain.model import TriggerView
from qinglong.errors import Conflict, InvalidInput
from qinglong.storage.definitions.params import (
    ProjectPauseParams,
    TriggerPauseParams,
    TriggerResumeParams,
)
from qinglong.storage.definitions.reader import DefinitionReader
from qinglong.storage.definitions.writer import DefinitionWriter

MAX_PAUSE_MS = 10 * 366 * 86_400_000
MAX_PAUSE_REASON = 1024


def trigger_pause(w: DefinitionWriter, params: TriggerPauseParams) -> TriggerView:
    """Pause a trigger from now (until ``until_ms``, or until resumed). Pausing a paused
    trigger again changes when its pause ends and why; the pause keeps its start."""
    key = w.live_key("trigger", params.project_id, params.trigger_id)
    until = params.until_ms
    if until is not None and (not isinstance(until, int) or isinstance(until, bool)
                              or until <= w.now_ms):
        raise InvalidInput("until", "must be later than now")
    if until is not None and until - w.now_ms > MAX_PAUSE_MS:
        raise InvalidInput("until", "must be within 10 years (leave it out to pause until "
                                    "resumed)")
    reason = params.reason
    if reason is not None and (not reason.strip() or len(reason) > MAX_PAUSE_REASON):
        raise InvalidInput("reason", f"must be 1 to {MAX_PAUSE_REASON} characters")
    open_pause = w.tx.one("trigger_pause_open", {**key, "now_ms": w.now_ms})
    if open_pause is None:
        began = w.now_ms
        w.tx.execute("trigger_pause_insert", {
            **key, "now_ms": began, "until_ms": until, "reason": reason,
            "actor": actor_name(params.actor)})
    else:
        began = int(open_pause["paused_at_ms"])
        w.tx.execute("trigger_pause_amend", {
            **key, "paused_at_ms": began, "until_ms": until, "reason": reason})
    w.tx.execute("schedule_pause_set", {
        **key, "paused_from_ms": began, "paused_until_ms": until, "now_ms": w.now_ms})
    [view] = DefinitionReader(w.tx).trigger_list(key["project_id"],
                                                                 key["trigger_id"])
    return view

def trigger_resume(w: DefinitionWriter, params: TriggerResumeParams) -> TriggerView:
    """End the trigger's pause now; the occurrence in progress follows the misfire policy."""
    key = w.live_key("trigger", params.project_id, params.trigger_id)
    open_pause = w.tx.one("trigger_pause_open", {**key, "now_ms": w.now_ms})
    if open_pause is None:
        raise Conflict(f"trigger {params.trigger_id!r} is not paused")
    began = int(open_pause["paused_at_ms"])
    w.tx.execute("trigger_pause_end", {
        **key, "paused_at_ms": began, "now_ms": w.now_ms,
        "actor": actor_name(params.actor)})
    w.tx.execute("schedule_pause_set", {
        **key, "paused_from_ms": began, "paused_until_ms": w.now_ms,
        "now_ms": w.now_ms})
    [view] = DefinitionReader(w.tx).trigger_list(key["project_id"],
                                                                 key["trigger_id"])
    return view

def project_pause(w: DefinitionWriter, params: ProjectPauseParams) -> list[TriggerView]:
    """Pause every trigger of the project (one pause each, in this transaction); a
    trigger already paused gets the new end and reason."""
    for trigger in _project_triggers(w, params.project_id):
        trigger_pause(w, TriggerPauseParams(
            project_id=params.project_id, trigger_id=trigger, actor=params.actor,
            until_ms=params.until_ms, reason=params.reason))
    return DefinitionReader(w.tx).trigger_list(params.project_id, None)

def project_resume(w: DefinitionWriter, params: ProjectPauseParams) -> list[TriggerView]:
    """Resume every paused trigger of the project; refused when none is paused."""
    resumed = 0
    for trigger in _project_triggers(w, params.project_id):
        key = {"project_id": params.project_id, "trigger_id": trigger}
        if w.tx.one("trigger_pause_open", {**key, "now_ms": w.now_ms}) is not None:
            trigger_resume(w, TriggerResumeParams(project_id=params.project_id,
                                                    trigger_id=trigger, actor=params.actor))
            resumed += 1
    if not resumed:
        raise Conflict(f"no trigger of project {params.project_id!r} is paused")
    return DefinitionReader(w.tx).trigger_list(params.project_id, None)

def _project_triggers(w: DefinitionWriter, project: str) -> list[str]:
    project_id(project)
    w.active_project(project)
    triggers = [view.revision.trigger_id for view in
                DefinitionReader(w.tx).trigger_list(project, None)]
    if not triggers:
        raise Conflict(f"project {project!r} has no triggers")
    return triggers
