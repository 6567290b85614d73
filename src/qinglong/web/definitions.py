"""Routes for projects, tasks and triggers: the service layer's catalog, as the CLI uses it,
with the same JSON shapes as ``--json``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Literal, TypeVar

from qinglong.domain.durations import parse_duration_ms
from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.trigger import DEFAULT_QUEUE_LIMIT, Overlap, OverlapPolicy
from qinglong.errors import InvalidInput, NotFound
from qinglong.service.access import Reach
from qinglong.service.accounts import Level
from qinglong.service.catalog import TaskPublishRequest as PublishTask
from qinglong.service.params import (
    ProjectPauseParams,
    TriggerPauseParams,
    TriggerPublishParams,
    TriggerResumeParams,
)
from qinglong.service.preview import MAX_PREVIEW, schedule_preview
from qinglong.service.views import reports, tasks, triggers
from qinglong.service.views.base import ViewModel
from qinglong.service.working_directory import check_directory_here
from qinglong.web import requests as rq
from qinglong.web.routing import LABEL_FILTER, Call, Endpoint, Query, Reply, read_instant
from qinglong.web.task_patch import task_patch

V = TypeVar("V", bound=ViewModel)
P = "/api/v1/projects/{project}"
T = P + "/tasks/{task}"
G = P + "/triggers/{trigger}"
NEXT = Query("next", "int", "How many upcoming fire times to show", 0, 100, default=1)
ALL = Query("include_deleted", "bool", "Include deleted ones", default=False)
LABEL = Query("label", "str", "Only the ones with this label", rule=LABEL_FILTER)
PINS = Query("pins", "bool", "Say which are your pins (pinned: true or false)", default=False)


def _pins(call: Call, kind: str, views: list[V]) -> list[V]:
    """``views``, each marked pinned or not for the caller when ``?pins=true`` asks."""
    return call.backend.pins.marked(call.who, kind, views) if call.query["pins"] else views


def _project(call: Call) -> str:
    return project_id(call.path["project"])


def _task(call: Call) -> tuple[str, str]:
    return _project(call), entity_id(call.path["task"], "task")


def _trigger(call: Call) -> tuple[str, str]:
    return _project(call), entity_id(call.path["trigger"], "trigger")


def _published(view: tasks.TaskPublishView | triggers.TriggerPublishView) -> Reply:
    return Reply(view, 201 if view.created else 200)


# --- projects ---------------------------------------------------------------------------------


def list_projects(call: Call) -> Reply:
    shown = call.visible
    return Reply([view for view in call.backend.catalog.project_list()
                  if shown is None or view.id in shown])


def create_project(call: Call) -> Reply:
    body: rq.ProjectCreateRequest = call.body
    view = call.backend.catalog.project_create(body.id, body.name)
    call.audit("project.create", project=body.id, target=f"project {body.id}")
    return Reply(view, 201)


def show_project(call: Call) -> Reply:
    wanted = _project(call)
    for view in call.backend.catalog.project_list():
        if view.id == wanted:
            return Reply(view)
    raise NotFound("project", wanted)


def _project_change(action: str) -> Endpoint:
    def handler(call: Call) -> Reply:
        project = _project(call)
        catalog = call.backend.catalog
        view = (catalog.project_archive(project) if action == "archive"
                else catalog.project_unarchive(project))
        call.audit(f"project.{action}", project=project, target=f"project {project}")
        return Reply(view)

    text = ("Archive a project: none of its triggers fire until it is unarchived"
            if action == "archive" else "Unarchive a project: its triggers fire again")
    return Endpoint("POST", f"{P}/{action}", handler, text, "projects", Level.ADMIN,
                    body=rq.Empty, response=tasks.ProjectView)


UNTIL_RULE = ("must be a duration from now (10m, 2h, 1d), an RFC 3339 time (e.g. "
              "2026-12-01T08:00:00Z) or epoch milliseconds")


def _until(call: Call, value: str | int | None) -> int | None:
    """When a pause ends: an instant (RFC 3339 or epoch milliseconds) or, as on the CLI, a
    duration from now (``10m``, ``2h``, ``1d``: the CLI's grammar)."""
    if value is None:
        return None
    if isinstance(value, str) and not value.strip().isdigit():
        try:
            span = parse_duration_ms(value)
        except ValueError:
            span = None
        if span is not None:
            return read_instant(call.clock.now_ms() + span, "until")
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise InvalidInput("until", UNTIL_RULE) from None
    return read_instant(value, "until")


def pause_project(call: Call) -> Reply:
    body: rq.PauseRequest = call.body
    project = _project(call)
    views = call.backend.catalog.project_pause(ProjectPauseParams(
        project_id=project, actor=call.who.username, until_ms=_until(call, body.until),
        reason=body.reason))
    call.audit("project.pause", project=project, target=f"project {project}",
               detail={"until": body.until, "reason": body.reason, "triggers": len(views)})
    return Reply(views)


def resume_project(call: Call) -> Reply:
    project = _project(call)
    views = call.backend.catalog.project_resume(ProjectPauseParams(project_id=project,
                                                                   actor=call.who.username))
    call.audit("project.resume", project=project, target=f"project {project}")
    return Reply(views)


# --- tasks ------------------------------------------------------------------------------------


def list_tasks(call: Call) -> Reply:
    return Reply(_pins(call, "task", call.backend.catalog.task_list(
        _project(call), call.query["include_deleted"], label=call.query["label"])))


def show_task(call: Call) -> Reply:
    return Reply(call.backend.catalog.task_show(*_task(call)))


def task_diff(call: Call) -> Reply:
    project, task = _task(call)
    return Reply(call.backend.catalog.task_diff(project, task, call.query["from"],
                                                call.query["to"]))


def publish_task(call: Call) -> Reply:
    body: rq.TaskPublishRequest = call.body
    project, task = _task(call)
    keep_shell = isinstance(body.command, rq.ShellCommandRequest) and body.command.shell is None
    check_directory_here(body.working_directory, call.backend.commands_run_here)  # as the CLI
    view = call.backend.catalog.task_publish(PublishTask(
        project_id=project, task_id=task, patch=task_patch(body), name=body.name,
        enabled=body.enabled, repin_triggers=body.repin_triggers, keep_shell=keep_shell))
    call.audit("task.publish", project=project, target=f"task {task}",
               detail={"revision": view.revision, "created": view.created,
                       "restored": view.restored,
                       "environment_set": sorted((body.environment or {}).keys())})
    return _published(view)


def _task_switch(enabled: bool) -> Endpoint:
    word = "enable" if enabled else "disable"

    def handler(call: Call) -> Reply:
        project, task = _task(call)
        view = call.backend.catalog.task_set_enabled(project, task, enabled)
        call.audit(f"task.{word}", project=project, target=f"task {task}",
                   detail={"revision": view.revision, "created": view.created})
        return Reply(view)

    text = ("Enable a task (its triggers are re-pinned)" if enabled
            else "Disable a task: publishes a disabled revision; its triggers stop")
    return Endpoint("POST", f"{T}/{word}", handler, text, "tasks", Level.OPERATE, body=rq.Empty,
                    response=tasks.TaskPublishView)


def _delete(kind: Literal["task", "trigger"]) -> Callable[[Call], Reply]:
    """DELETE of a task or a trigger: it leaves the lists; its revisions stay."""
    def handler(call: Call) -> Reply:
        project, name = _project(call), entity_id(call.path[kind], kind)
        catalog = call.backend.catalog
        view = (catalog.task_delete(project, name) if kind == "task"
                else catalog.trigger_delete(project, name))
        call.audit(f"{kind}.delete", project=project, target=f"{kind} {name}")
        return Reply(view)

    return handler


# --- triggers ---------------------------------------------------------------------------------


def list_all_triggers(call: Call) -> Reply:
    project = call.query["project"]
    shown = call.visible
    return Reply(_pins(call, "trigger", [
        view for view in call.backend.catalog.trigger_list(
            None if project is None else project_id(project), next_count=call.query["next"],
            include_deleted=call.query["include_deleted"], label=call.query["label"])
        if shown is None or view.project in shown]))


def list_triggers(call: Call) -> Reply:
    return Reply(_pins(call, "trigger", call.backend.catalog.trigger_list(
        _project(call), next_count=call.query["next"],
        include_deleted=call.query["include_deleted"], label=call.query["label"])))


def show_trigger(call: Call) -> Reply:
    project, trigger = _trigger(call)
    found = call.backend.catalog.trigger_list(project, next_count=call.query["next"],
                                              include_deleted=True, trigger_id=trigger)
    if not found:
        raise NotFound("trigger", trigger)
    return Reply(_pins(call, "trigger", found)[0])


def _overlap(body: rq.TriggerPublishRequest) -> Overlap | None:
    if body.overlap is None:
        if body.overlap_queue_limit is not None:
            raise InvalidInput("overlap_queue_limit", "give it with overlap queue")
        return None
    return Overlap(policy=OverlapPolicy(body.overlap),
                   queue_limit=DEFAULT_QUEUE_LIMIT if body.overlap_queue_limit is None
                   else body.overlap_queue_limit)


def _publish_trigger(call: Call, params: TriggerPublishParams,
                     action: str) -> triggers.TriggerPublishView:
    view = call.backend.catalog.trigger_publish(params)
    call.audit(action, project=params.project_id, target=f"trigger {params.trigger_id}",
               detail={"revision": view.revision, "created": view.created,
                       "restored": view.restored})
    return view


def publish_trigger(call: Call) -> Reply:
    body: rq.TriggerPublishRequest = call.body
    project, trigger = _trigger(call)
    if body.task is not None:
        entity_id(body.task, "task")
    return _published(_publish_trigger(call, TriggerPublishParams(
        project_id=project, trigger_id=trigger, task_id=body.task,
        expression=_schedule_text(body.cron, body.schedule),
        timezone=body.timezone, misfire_policy=body.misfire, enabled=body.enabled,
        overlap=_overlap(body), dst_gap=body.dst_gap, dst_overlap=body.dst_overlap,
        jitter_s=body.jitter_s, jitter_random_s=body.jitter_random_s, flow=body.flow,
        parameters=body.parameters), "trigger.publish"))


def _trigger_switch(enabled: bool) -> Endpoint:
    word = "enable" if enabled else "disable"

    def handler(call: Call) -> Reply:
        project, trigger = _trigger(call)
        return Reply(_publish_trigger(call, TriggerPublishParams(
            project_id=project, trigger_id=trigger, enabled=enabled), f"trigger.{word}"))

    text = ("Start a disabled trigger again, pinned to its task's current revision" if enabled
            else "Stop a trigger: publishes a disabled revision")
    return Endpoint("POST", f"{G}/{word}", handler, text, "triggers", Level.OPERATE,
                    body=rq.Empty, response=triggers.TriggerPublishView)


def pause_trigger(call: Call) -> Reply:
    body: rq.PauseRequest = call.body
    project, trigger = _trigger(call)
    view = call.backend.catalog.trigger_pause(TriggerPauseParams(
        project_id=project, trigger_id=trigger, actor=call.who.username,
        until_ms=_until(call, body.until), reason=body.reason))
    call.audit("trigger.pause", project=project, target=f"trigger {trigger}",
               detail={"until": body.until, "reason": body.reason})
    return Reply(view)


def resume_trigger(call: Call) -> Reply:
    project, trigger = _trigger(call)
    view = call.backend.catalog.trigger_resume(TriggerResumeParams(
        project_id=project, trigger_id=trigger, actor=call.who.username))
    call.audit("trigger.resume", project=project, target=f"trigger {trigger}")
    return Reply(view)


def trigger_ledger(call: Call) -> Reply:
    project, trigger = _trigger(call)
    return Reply(call.backend.ledger.ledger(
        project, trigger, now_ms=call.clock.now_ms(), from_ms=call.query["from"],
        to_ms=call.query["to"], limit=call.query["limit"]))


def _schedule_text(cron: str | None, schedule: str | None) -> str | None:
    if cron is not None and schedule is not None:
        raise InvalidInput("schedule", "give cron or schedule, not both")
    return cron if cron is not None else schedule


def preview(call: Call) -> Reply:
    after = call.query["after"]
    text = _schedule_text(call.query["cron"], call.query["schedule"])
    if text is None:
        raise InvalidInput("cron", "is required (or schedule: every DURATION, at TIME)")
    return Reply(schedule_preview(text, call.query["timezone"], count=call.query["count"],
                                  after_ms=call.clock.now_ms() if after is None else after))


ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/api/v1/projects", list_projects, "List the projects you may read",
             "projects", Level.READ, response=tasks.ProjectView, many=True, reach=Reach.LISTING),
    Endpoint("POST", "/api/v1/projects", create_project, "Create a project", "projects",
             Level.ADMIN, body=rq.ProjectCreateRequest, response=tasks.ProjectView, status=201),
    Endpoint("GET", P, show_project, "Show a project", "projects", Level.READ,
             response=tasks.ProjectView),
    _project_change("archive"),
    _project_change("unarchive"),
    Endpoint("POST", f"{P}/pause", pause_project, "Pause every trigger of a project",
             "projects", Level.OPERATE, body=rq.PauseRequest, response=triggers.TriggerView, many=True),
    Endpoint("POST", f"{P}/resume", resume_project, "Resume the paused triggers of a project",
             "projects", Level.OPERATE, body=rq.Empty, response=triggers.TriggerView, many=True),
    Endpoint("GET", f"{P}/tasks", list_tasks, "List the tasks of a project (current revisions; "
             "environment names only)", "tasks", Level.READ, response=tasks.TaskView, many=True,
             query=(ALL, LABEL, PINS)),
    Endpoint("GET", T, show_task, "Show a task with every revision and what each changed",
             "tasks", Level.READ, response=tasks.TaskShowView),
    Endpoint("POST", f"{T}/revisions", publish_task,
             "Publish a task revision (what is left out keeps its value; a no-op when nothing "
             "changes: 200, else 201)", "tasks", Level.ADMIN, body=rq.TaskPublishRequest,
             response=tasks.TaskPublishView, also=(201,)),
    Endpoint("GET", f"{T}/diff", task_diff, "What changed between two revisions of a task",
             "tasks", Level.READ, response=tasks.TaskDiffView,
             query=(Query("from", "int", "Older revision (default: the one before to)", 1),
                    Query("to", "int", "Newer revision (default: the latest)", 1))),
    _task_switch(True),
    _task_switch(False),
    Endpoint("DELETE", T, _delete("task"), "Delete a task (refused while triggers use it)", "tasks",
             Level.ADMIN, response=tasks.TaskView),
    Endpoint("GET", "/api/v1/triggers", list_all_triggers,
             "List triggers with their state and next fire times", "triggers", Level.READ,
             response=triggers.TriggerView, many=True, reach=Reach.LISTING,
             query=(Query("project", "str", "Only this project"), NEXT, ALL, LABEL, PINS)),
    Endpoint("GET", f"{P}/triggers", list_triggers, "List the triggers of a project",
             "triggers", Level.READ, response=triggers.TriggerView, many=True,
             query=(NEXT, ALL, LABEL, PINS)),
    Endpoint("GET", G, show_trigger, "Show a trigger: its state and next fire times",
             "triggers", Level.READ, response=triggers.TriggerView, query=(NEXT, PINS)),
    Endpoint("POST", f"{G}/revisions", publish_trigger,
             "Publish a trigger revision (its schedule restarts from now; a no-op when nothing "
             "changes: 200, else 201)", "triggers", Level.ADMIN, body=rq.TriggerPublishRequest,
             response=triggers.TriggerPublishView, also=(201,)),
    _trigger_switch(True),
    _trigger_switch(False),
    Endpoint("POST", f"{G}/pause", pause_trigger, "Pause a trigger from now, until resumed or "
             "until a time", "triggers", Level.OPERATE, body=rq.PauseRequest,
             response=triggers.TriggerView),
    Endpoint("POST", f"{G}/resume", resume_trigger, "End a trigger's pause now", "triggers",
             Level.OPERATE, body=rq.Empty, response=triggers.TriggerView),
    Endpoint("DELETE", G, _delete("trigger"), "Delete a trigger", "triggers", Level.ADMIN,
             response=triggers.TriggerView),
    Endpoint("GET", f"{G}/ledger", trigger_ledger,
             "The occurrence ledger: every nominal time in a window and its fate", "triggers",
             Level.READ, response=reports.LedgerView,
             query=(Query("from", "instant", "Start of the window (default: an hour before its "
                                             "end)"),
                    Query("to", "instant", "End of the window (default: now, then the next 3 "
                                           "occurrences)"),
                    Query("limit", "int", "The most recent N occurrences", 1, 10_000,
                          default=50))),
    Endpoint("GET", "/api/v1/cron/preview", preview,
             "The next occurrences of a schedule in a zone, with DST marks", "triggers",
             Level.READ, response=reports.PreviewView, reach=Reach.SELF,
             query=(Query("cron", "str", "A cron expression, e.g. 30 2 * * *"),
                    Query("schedule", "str", "Or any schedule: a cron expression, every "
                                             "DURATION [from TIME], at TIME"),
                    Query("timezone", "str", "IANA zone, e.g. Europe/Berlin", default="UTC"),
                    Query("count", "int", "How many", 1, MAX_PREVIEW, default=10),
                    Query("after", "instant", "Start after this time (default: now)"))),
)
