"""`ql task run` and `ql trigger fire`: run now, outside the schedule (one manual Run).

Attached to the `task` and `trigger` groups when this module is imported (cli/main.py does).
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from qinglong.cli.commands.task import task, task_option
from qinglong.cli.commands.trigger import trigger, trigger_option
from qinglong.cli.context import respond, services
from qinglong.cli.output import say, when
from qinglong.cli.params import database_url_option, json_option, project_option
from qinglong.domain.manual import MAX_ACTOR, ManualRequest, actor_name, request_id
from qinglong.domain.parameters import parse_values
from qinglong.ids import new_uuid
from qinglong.service.views.runs import RunNowView

F = TypeVar("F", bound=Callable[..., Any])


def default_actor() -> str:
    """The OS user this command runs as (``uid:N`` when it has no name)."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError, ImportError):
        name = ""
    name = name.strip()[:MAX_ACTOR]
    return name or f"uid:{os.getuid()}"


def _run_now_options(func: F) -> F:
    """The options `ql task run` and `ql trigger fire` take after the one naming what runs."""
    func = database_url_option(json_option(func))
    func = click.option(
        "--actor", envvar="QL_ACTOR", metavar="NAME",
        help="Who asks, recorded on the Run (env QL_ACTOR; default: your OS user name).")(func)
    func = click.option(
        "--param", "params", multiple=True, metavar="NAME=VALUE",
        help="A value for one of the task's parameters (repeatable; the others take their "
             "defaults). Refused, with nothing admitted, for a name the task does not declare "
             "or a value of another type.")(func)
    func = click.option(
        "--request-id", "given_id", metavar="ID",
        help="Client request id (default: a new UUID, printed). The same id sent again returns "
             "the Run it admitted instead of admitting another.")(func)
    return func


def _request(project: str, *, actor: str | None, given_id: str | None, task_id: str | None = None,
             trigger_id: str | None = None, params: tuple[str, ...] = ()) -> ManualRequest:
    """The request, checked before any database is opened (errors name the options)."""
    who = actor_name(actor if actor is not None else default_actor(), "--actor")
    rid = request_id(given_id if given_id is not None else new_uuid(), "--request-id")
    return ManualRequest(project_id=project, task_id=task_id, trigger_id=trigger_id,
                         request_id=rid, actor=who, parameters=parse_values(params))


def _admit(database_url: str, as_json: bool, request: ManualRequest, again: str) -> None:
    respond(services(database_url), lambda opened: opened.manual.admit(request), as_json,
            lambda view: _say_admitted(view, request, again))


def _say_admitted(view: RunNowView, request: ManualRequest, again: str) -> None:
    run_id = view.id
    target = request.target
    if view.admitted:
        say(f"admitted run {run_id} ({target}, requested by {view.requested_by})")
    else:
        say(f"already admitted: run {run_id} ({target}, requested by {view.requested_by} at "
            f"{when(view.created_at_ms)}, now {view.status}); nothing new was admitted")
    if view.in_doubt:
        say("(the database's reply to COMMIT was lost; the Run was found by its request id)")
    say(f"request id {request.request_id}: `{again} --request-id {request.request_id}` never "
        f"admits a second Run; `ql run show {run_id[:13]}` follows this one")


@task.command("run")
@project_option
@task_option
@_run_now_options
def run_task(project: str, task_id: str, given_id: str | None, actor: str | None,
             params: tuple[str, ...], database_url: str, as_json: bool) -> None:
    """Run TASK now: admit one manual Run of its current revision, queued for `ql serve` (SQLite)
    or a `ql worker` (PostgreSQL, as ql_runtime). The task must be enabled and its project
    active. A Run of no trigger: no overlap policy applies, the task's concurrency limit and the
    global limit do. Exit 0 also when the request id had already admitted this Run."""
    _admit(database_url, as_json,
           _request(project, actor=actor, given_id=given_id, task_id=task_id, params=params),
           f"ql task run --project {project} --task {task_id}")


@trigger.command("fire")
@project_option
@trigger_option
@_run_now_options
def fire_trigger(project: str, trigger_id: str, given_id: str | None, actor: str | None,
                 params: tuple[str, ...], database_url: str, as_json: bool) -> None:
    """Fire TRIGGER now: admit one manual Run of the task revision it pins, outside its cron
    schedule (which carries on unchanged). The trigger and its task must be enabled and its
    project active. The Run carries the trigger, so its overlap policy and the task's
    concurrency limit apply when it comes up for dispatch. Exit 0 also when the request id
    had already admitted this Run."""
    _admit(database_url, as_json,
           _request(project, actor=actor, given_id=given_id, trigger_id=trigger_id,
                    params=params),
           f"ql trigger fire --project {project} --trigger {trigger_id}")
