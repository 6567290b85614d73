"""Routes for Runs: pages with filters and a cursor, one Run with its attempts and events,
its log (whole, a tail, or followed live over server-sent events), cancelling, run now (a
task run or a trigger fire, idempotent per client request id), and per-day stats."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Literal

from starlette.responses import PlainTextResponse, Response, StreamingResponse

from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.runs import RunStatus
from qinglong.errors import InvalidInput
from qinglong.service.access import Reach
from qinglong.service.accounts import Level
from qinglong.service.params import RunListParams
from qinglong.service.runs import LogPiece
from qinglong.service.views import reports
from qinglong.service.views import runs as run_views
from qinglong.web import requests as rq
from qinglong.web.routing import Call, Endpoint, Query, Reply
from qinglong.web.sse import log_events

R = "/api/v1/runs/{run}"
EVENT_STREAM = "text/event-stream"


def _run_id(call: Call) -> str:
    return call.path["run"]


def _scoped(project: str | None, text: str | None, kind: str) -> tuple[str | None, str | None]:
    """A task or trigger filter, also as ``project/id`` (how the panel and the CLI show one;
    spaces around the slash allowed): the project it names, and the id."""
    if text is None or "/" not in text:
        return project, None if text is None else entity_id(text, kind)
    named, _, wanted = (part.strip() for part in text.partition("/"))
    named = project_id(named, kind)
    if project is not None and project_id(project) != named:
        raise InvalidInput(kind, f"{text!r} names project {named!r}, but the project filter is "
                                 f"{project!r}")
    return named, entity_id(wanted, kind)


def list_runs(call: Call) -> Reply:
    q = call.query
    project, task = _scoped(q["project"], q["task"], "task")
    project, trigger = _scoped(project, q["trigger"], "trigger")
    filters = RunListParams(
        project_id=None if project is None else project_id(project),
        task_id=task,
        trigger_id=trigger,
        status=q["status"], since_ms=q["since"], until_ms=q["until"], limit=q["limit"],
        oldest_first=q["order"] == "oldest",
        projects=None if call.visible is None else tuple(sorted(call.visible)))
    return Reply(call.backend.pages.page(filters, q["cursor"]))


def show_run(call: Call) -> Reply:
    return Reply(call.backend.runs.run_show(_run_id(call), call.query["tail"]))


def cancel_run(call: Call) -> Reply:
    view = call.backend.runs_for(call.who.username).run_cancel(_run_id(call), "user")
    call.audit("run.cancel", project=view.project, target=f"run {view.id}",
               detail={"cancel": view.cancel, "status": view.status})
    return Reply(view)


def request_id(call: Call) -> str | None:
    body: rq.RunNowRequest = call.body
    header = call.headers.get("idempotency-key")
    if header is not None and body.request_id is not None and header != body.request_id:
        raise InvalidInput("request_id", "differs from the Idempotency-Key header: send one")
    return body.request_id if body.request_id is not None else header


def _admitted(call: Call, view: run_views.RunNowView, target: str) -> Reply:
    call.audit("run.now", project=view.project, target=target,
               detail={"run": view.id, "request_id": view.request_id,
                       "admitted": view.admitted})
    return Reply(view, 201 if view.admitted else 200)


def _run_now(call: Call, kind: Literal["task", "trigger"]) -> Reply:
    """Run now: one manual Run of the task, or of the trigger (``kind``) the path names."""
    project = project_id(call.path["project"])
    name = entity_id(call.path[kind], kind)
    manual = call.backend.manual
    view = manual.admit(manual.request(
        project, actor=call.who.username, request_id=request_id(call),
        task_id=name if kind == "task" else None, trigger_id=name if kind == "trigger" else None,
        parameters=call.body.parameters))
    return _admitted(call, view, f"{kind} {name}")


def run_task(call: Call) -> Reply:
    return _run_now(call, "task")


def fire_trigger(call: Call) -> Reply:
    return _run_now(call, "trigger")


def run_logs(call: Call) -> Response:
    run_id = _run_id(call)
    runs = call.backend.runs
    detail = runs.run_show(run_id, 0)  # NotFound before anything is streamed
    full_id = detail.run.id
    attempts = detail.attempts
    attempt = call.query["attempt"]
    if not attempts:
        raise InvalidInput("attempt", "the Run has no attempt")
    if attempt is not None and not 1 <= attempt <= len(attempts):
        raise InvalidInput("attempt", f"the Run has attempts 1 to {len(attempts)}")
    follow = call.query["follow"] or EVENT_STREAM in call.headers.get("accept", "")
    if not follow:
        text = "".join(piece.text for piece in
                       runs.log_stream(full_id, attempt=attempt, follow=False))
        tail = call.query["tail"]
        if tail:
            lines = text.splitlines(keepends=True)[-tail:]
            text = "".join(lines)
        return PlainTextResponse(text, media_type="text/plain; charset=utf-8",
                                 headers={"Cache-Control": "no-store"})

    def stream(wait: Callable[[float], None]) -> Iterator[LogPiece]:
        return runs.log_stream(full_id, attempt=attempt, follow=True, wait=wait)

    def status() -> str:
        return runs.run_show(full_id, 0).run.status

    return StreamingResponse(log_events(stream, status, closing=call.backend.closing),
                             media_type=EVENT_STREAM,
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def task_stats(call: Call) -> Reply:
    q = call.query
    task = None if q["task"] is None else entity_id(q["task"], "task")
    return Reply(call.backend.stats.per_day(
        project_id(call.path["project"]), now_ms=call.clock.now_ms(), task_id=task,
        from_day=q["from"], to_day=q["to"], timezone=q["timezone"]))


RUN_NOW = ("Client request id: the body's request_id or the Idempotency-Key header (the same "
           "id sent again returns the Run it admitted: 200; a new Run: 201)")

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("GET", "/api/v1/runs", list_runs, "List Runs, newest occurrence first, a page at "
             "a time (of the projects you may read)", "runs", Level.READ,
             response=run_views.RunPageView, reach=Reach.LISTING,
             query=(Query("project", "str", "Only this project"),
                    Query("task", "qualified", "Only Runs of this task (TASK or PROJECT/TASK)"),
                    Query("trigger", "qualified", "Only Runs of this trigger (TRIGGER or "
                                            "PROJECT/TRIGGER)"),
                    Query("status", "choice", "Only this status",
                          choices=tuple(status.value for status in RunStatus)),
                    Query("since", "instant", "Only Runs for occurrences at or after"),
                    Query("until", "instant", "Only Runs for occurrences before"),
                    Query("limit", "int", "Runs per page", 1, 1000, default=50),
                    Query("order", "choice", "newest or oldest first",
                          choices=("newest", "oldest"), default="newest"),
                    Query("cursor", "str", "next_cursor of the previous page"))),
    Endpoint("GET", R, show_run, "Show a Run (a full id or a unique prefix of 8+ characters) "
             "with its attempts, events and log tail", "runs", Level.READ,
             response=run_views.RunDetailView,
             query=(Query("tail", "int", "Lines of the last attempt's log", 0, 10_000,
                          default=20),)),
    Endpoint("POST", f"{R}/cancel", cancel_run, "Cancel a Run (one nobody runs ends at once; a "
             "running one is asked to stop)", "runs", Level.OPERATE, body=rq.Empty,
             response=run_views.RunCancelView),
    Endpoint("GET", f"{R}/logs", run_logs, "An attempt's output: whole or its tail as text, or "
             "followed live as server-sent events (follow=true or Accept: text/event-stream: "
             "events log {text}, then end {status}; comments keep the stream alive)", "runs",
             Level.READ, media="text/plain", medias=("text/plain", EVENT_STREAM),
             query=(Query("attempt", "int", "Attempt N (default: the latest; followed, it moves "
                                            "on to a retry)", 1, 1000),
                    Query("tail", "int", "Only the last N lines (0: all)", 0, 100_000,
                          default=0),
                    Query("follow", "bool", "Stream until the Run ends", default=False))),
    Endpoint("POST", "/api/v1/projects/{project}/tasks/{task}/run", run_task,
             "Run a task now: one manual Run of its current revision", "runs", Level.OPERATE,
             body=rq.RunNowRequest, response=run_views.RunNowView, also=(201,), description=RUN_NOW),
    Endpoint("POST", "/api/v1/projects/{project}/triggers/{trigger}/fire", fire_trigger,
             "Fire a trigger now, outside its schedule", "runs", Level.OPERATE,
             body=rq.RunNowRequest, response=run_views.RunNowView, also=(201,), description=RUN_NOW),
    Endpoint("GET", "/api/v1/projects/{project}/stats", task_stats,
             "Per task and day: Runs, successes, failures, cancellations, overlap skips, the "
             "success rate, total and longest duration (a Run counts on the day it was admitted)", "stats", Level.READ,
             response=reports.StatsView,
             query=(Query("task", "str", "Only this task"),
                    Query("from", "date", "First day (default: 6 days before to)"),
                    Query("to", "date", "Last day, included (default: today)"),
                    Query("timezone", "str", "Whose days: an IANA zone", default="UTC"))),
)
