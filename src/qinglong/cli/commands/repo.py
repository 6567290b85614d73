"""`ql repo`: Git subscriptions -- repositories of scripts a project pulls on a schedule
(docs/subscriptions.md)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from qinglong.cli.commands.manual import default_actor
from qinglong.cli.context import respond, services
from qinglong.cli.output import emit_json, emit_table, say, when
from qinglong.cli.params import database_url_option, json_option, project_option
from qinglong.domain.manual import actor_name
from qinglong.domain.repos import DEFAULT_INCLUDE, PullReport, Repo, RepoSpec, pull_task_id
from qinglong.ids import new_uuid
from qinglong.service import git_fetch

F = TypeVar("F", bound=Callable[..., Any])


@click.group()
def repo() -> None:
    """Git subscriptions: a repository whose scripts a project pulls on a schedule. Each pull
    is a Run of the subscription's pull task (its log and outcome like any Run's); it imports
    new and changed scripts as revisions in one transaction and removes those gone from the
    branch. With --auto-tasks, a script's `cron:` header line makes a task and a trigger,
    updated by later pulls and disabled when the script goes (never deleted)."""


def _name(func: F) -> F:
    return click.argument("name", metavar="NAME")(func)


def _actor(func: F) -> F:
    return click.option("--actor", envvar="QL_ACTOR", metavar="NAME",
                        help="Who asks, for the history (default: the OS user; "
                             "$QL_ACTOR).")(func)


def _say_report(report: PullReport, dry_run: bool) -> None:
    verb = "would " if dry_run else ""
    say(f"commit {report.commit[:12]}: {verb}save {len(report.saved)}, {verb}remove "
        f"{len(report.removed)}, {report.unchanged} unchanged")
    for path in report.saved:
        say(f"  saved    {path}")
    for path in report.removed:
        say(f"  removed  {path}")
    for task in report.tasks_created:
        say(f"  task created   {task}")
    for task in report.tasks_updated:
        say(f"  task updated   {task}")
    for task in report.tasks_disabled:
        say(f"  task disabled  {task}")
    for path, why in report.problems:
        say(f"  not imported  {path}: {why}")


def _view(item: Repo) -> dict[str, object]:
    return {"project": item.project_id, "name": item.name, **item.spec.to_json(),
            "pull_task": pull_task_id(item.name), "created_by": item.created_by,
            "created_at_ms": item.created_at_ms, "removed_at_ms": item.removed_at_ms,
            "last_commit": item.last_commit, "last_pull_at_ms": item.last_pull_at_ms,
            "last_report": item.last_report}


@repo.command("add")
@project_option
@_name
@click.option("--url", required=True, metavar="URL",
              help="The repository: https://, ssh://, git@host:path, file:// or a local path.")
@click.option("--branch", default="main", show_default=True, metavar="BRANCH")
@click.option("--schedule", metavar="CRON",
              help="Pull on this cron schedule (default: only when asked, ql repo pull).")
@click.option("--timezone", default="UTC", show_default=True, metavar="ZONE",
              help="The zone of --schedule and of the scripts' cron lines.")
@click.option("--path", "include", multiple=True, metavar="GLOB",
              help=f"Which files are scripts (repeatable; default: {' '.join(DEFAULT_INCLUDE)}); "
                   "a glob without / matches a file's name in any folder.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Files to leave out (repeatable).")
@click.option("--auto-tasks", is_flag=True,
              help="Make a task and a trigger of every script whose header has a cron: line.")
@click.option("--token-env", metavar="NAME",
              help="An https token: this entry of the project's environment (ql env set "
                   "--secret).")
@click.option("--ssh-key-env", metavar="NAME",
              help="An ssh deploy key: this entry of the project's environment.")
@click.option("--dry-run", is_flag=True,
              help="Fetch and say what the first pull would import; write nothing.")
@_actor
@database_url_option
@json_option
def add(project: str, name: str, url: str, branch: str, schedule: str | None, timezone: str,
        include: tuple[str, ...], exclude: tuple[str, ...], auto_tasks: bool,
        token_env: str | None, ssh_key_env: str | None, dry_run: bool, actor: str | None,
        database_url: str, as_json: bool) -> None:
    """Subscribe the project to a Git repository: its scripts go to the folder NAME/."""
    spec = RepoSpec(url=url, branch=branch, include=include or DEFAULT_INCLUDE, exclude=exclude,
                    auto_tasks=auto_tasks, timezone=timezone, token_env=token_env,
                    ssh_key_env=ssh_key_env)
    if dry_run:
        with services(database_url) as opened:
            fetched = opened.repos.fetch(project, name, spec, git_fetch.environment(), say)
        report = PullReport(commit=fetched.commit, saved=tuple(sorted(fetched.files)),
                            problems=fetched.problems)
        if as_json:
            emit_json(report.to_json())
        else:
            _say_report(report, True)
        return
    who = actor_name(actor or default_actor(), "--actor")

    def text(item: Repo) -> None:
        say(f"subscribed {project} to {url} ({branch}) as {name}; pull task "
            f"{pull_task_id(name)}" + (f", on {schedule} ({timezone})" if schedule else
                                       "; pull it with ql repo pull"))

    respond(services(database_url), lambda s: s.repos.add(
        project, name, spec, who, cron=schedule, timezone=timezone), as_json,
        lambda item: emit_json(_view(item)) if as_json else text(item))


@repo.command("ls")
@project_option
@click.option("--all", "removed", is_flag=True, help="Include removed subscriptions.")
@database_url_option
@json_option
def ls(project: str, removed: bool, database_url: str, as_json: bool) -> None:
    """List the project's subscriptions."""
    with services(database_url) as opened:
        items = opened.repos.listing(project, removed)
    if as_json:
        emit_json([_view(i) for i in items])
        return
    emit_table([(i.name, i.spec.url, i.spec.branch, "yes" if i.spec.auto_tasks else "no",
                 (i.last_commit or "-")[:12], when(i.last_pull_at_ms),
                 "removed" if i.removed_at_ms else "") for i in items],
               ["NAME", "URL", "BRANCH", "AUTO-TASKS", "COMMIT", "PULLED", ""])


@repo.command("show")
@project_option
@_name
@database_url_option
@json_option
def show(project: str, name: str, database_url: str, as_json: bool) -> None:
    """A subscription and what its last pull found."""
    with services(database_url) as opened:
        item = opened.repos.get(project, name)
    if as_json:
        emit_json(_view(item))
        return
    spec = item.spec
    last = f"{when(item.last_pull_at_ms)} commit {(item.last_commit or '-')[:12]}"
    for label, value in (("url", spec.url), ("branch", spec.branch),
                         ("path", " ".join(spec.include)),
                         ("exclude", " ".join(spec.exclude) or "-"),
                         ("auto-tasks", "yes" if spec.auto_tasks else "no"),
                         ("pull task", pull_task_id(item.name)), ("last pull", last)):
        say(f"{label:<11}{value}")
    if item.last_report:
        report = item.last_report
        say(f"last report: saved {len(report.get('saved', []))}, removed "  # type: ignore[arg-type]
            f"{len(report.get('removed', []))}, problems "  # type: ignore[arg-type]
            f"{len(report.get('problems', []))}")  # type: ignore[arg-type]


@repo.command("rm")
@project_option
@_name
@database_url_option
@json_option
def rm(project: str, name: str, database_url: str, as_json: bool) -> None:
    """End a subscription: its pull task and trigger are disabled. The scripts and tasks it
    imported stay, with their Runs' history."""
    respond(services(database_url), lambda s: s.repos.remove(project, name), as_json,
            lambda item: say(f"removed subscription {project}/{name}; its scripts and tasks "
                             "stay"))


@repo.command("pull")
@project_option
@_name
@_actor
@database_url_option
@json_option
def pull(project: str, name: str, actor: str | None, database_url: str, as_json: bool) -> None:
    """Pull now: admit a Run of the pull task (follow it with ql run show / ql run logs)."""
    who = actor_name(actor or default_actor(), "--actor")
    with services(database_url) as opened:
        run_id = opened.repos.pull(project, name, who, new_uuid())
    if as_json:
        emit_json({"run": run_id})
        return
    say(f"pull of {project}/{name} admitted as Run {run_id}")


@repo.command("import-run", hidden=True)
@project_option
@click.option("--repo", "name", required=True, metavar="NAME")
@database_url_option
def import_run(project: str, name: str, database_url: str) -> None:
    """What a pull Run executes: fetch and import, saying what it does (its log)."""
    actor = actor_name(os.environ.get("QL_ACTOR") or default_actor(), "QL_ACTOR")
    with services(database_url) as opened:
        report = opened.repos.import_run(project, name, actor, git_fetch.environment(), say)
    _say_report(report, False)
    if not report.wrote:
        say("nothing changed")
    sys.stdout.flush()
