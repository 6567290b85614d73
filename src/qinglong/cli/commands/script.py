"""`ql script`: a project's scripts, each save an immutable revision (docs/scripts.md)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from qinglong.cli.commands.manual import default_actor
from qinglong.cli.context import respond, services
from qinglong.cli.output import emit_json, emit_table, say, warn
from qinglong.cli.params import database_url_option, json_option, project_option
from qinglong.domain.manual import actor_name
from qinglong.domain.scripts import MAX_SCRIPT_BYTES
from qinglong.errors import InvalidInput
from qinglong.service.views.scripts import ScriptDiffView, ScriptSaveView, ScriptView


@click.group()
def script() -> None:
    """Scripts: a project's files (Python, Node, shell). Every save is an immutable revision
    named by the SHA-256 of its content; a task that runs a script (`ql task publish --script
    PATH`) pins that content, and a worker on any host runs exactly it. Saving a script moves
    the tasks that run it onto the new content, unless --keep-tasks is given."""


F = TypeVar("F", bound=Callable[..., Any])


def _path_argument(func: F) -> F:
    return click.argument("path", metavar="PATH")(func)


def _actor_option(func: F) -> F:
    return click.option("--actor", envvar="QL_ACTOR", metavar="NAME",
                        help="Who saves it, for the history (default: the OS user; "
                             "$QL_ACTOR).")(func)


def _size(size: int | None) -> str:
    return "-" if size is None else f"{size:,}"


def _read_source(source: str) -> bytes:
    """The bytes to save: a file, or standard input for ``-``."""
    if source == "-":
        data = sys.stdin.buffer.read(MAX_SCRIPT_BYTES + 1)
    else:
        try:
            with open(source, "rb") as handle:
                data = handle.read(MAX_SCRIPT_BYTES + 1)
        except OSError as exc:
            raise InvalidInput("file", f"cannot read {source!r}: {exc.strerror or exc}") from None
    return data


@script.command("put")
@project_option
@_path_argument
@click.option("-f", "--file", "source", metavar="FILE",
              help="Read the content from FILE ('-': standard input; default: the file named "
                   "PATH in this directory).")
@click.option("--if-revision", "expected", type=click.IntRange(0), metavar="N",
              help="Save only if the script is still at revision N (0: only if it is new); "
                   "a save someone made since is refused, never overwritten.")
@click.option("--keep-tasks", is_flag=True,
              help="Leave the tasks that run this script on the content they pinned.")
@_actor_option
@database_url_option
@json_option
def put(project: str, path: str, source: str | None, expected: int | None, keep_tasks: bool,
        actor: str | None, database_url: str, as_json: bool) -> None:
    """Save PATH as the script's next revision (nothing when the content is unchanged)."""
    content = _read_source(source if source is not None else path)
    who = actor_name(actor or default_actor(), "--actor")

    def text(view: ScriptSaveView) -> None:
        if view.changed:
            say(f"saved {project}/{path} revision {view.revision} "
                f"({_size(view.size_bytes)} bytes, sha256 {(view.digest or '')[:12]})")
        else:
            say(f"{project}/{path} unchanged at revision {view.revision}")
        if view.tasks_updated:
            say("tasks now running it: " + ", ".join(view.tasks_updated))
        if view.tasks_behind:
            warn("tasks still on an older revision (--keep-tasks): "
                 + ", ".join(view.tasks_behind))

    respond(services(database_url), lambda s: s.scripts.put(
        project, path, content, who, expected_revision=expected, keep_tasks=keep_tasks),
        as_json, text)


@script.command("get")
@project_option
@_path_argument
@click.option("--revision", type=click.IntRange(1), metavar="N",
              help="That revision (default: the current one).")
@click.option("-o", "--output", metavar="FILE", help="Write the content to FILE.")
@database_url_option
@json_option
def get(project: str, path: str, revision: int | None, output: str | None, database_url: str,
        as_json: bool) -> None:
    """Print a script's content (or write it to --output)."""
    with services(database_url) as opened:
        view = opened.scripts.get(project, path, revision)
    if as_json:
        emit_json(view)
        return
    if output is not None:
        try:
            Path(output).write_text(view.content, encoding="utf-8")
        except OSError as exc:
            raise InvalidInput("output", f"cannot write {output!r}: {exc.strerror or exc}") \
                from None
        say(f"wrote {project}/{path} revision {view.revision} to {output}")
        return
    sys.stdout.write(view.content)
    sys.stdout.flush()


@script.command("ls")
@project_option
@click.argument("prefix", required=False, default="", metavar="[FOLDER]")
@click.option("--all", "removed", is_flag=True, help="Include removed scripts.")
@database_url_option
@json_option
def ls(project: str, prefix: str, removed: bool, database_url: str, as_json: bool) -> None:
    """List the project's scripts (those under FOLDER)."""
    def text(views: list[ScriptView]) -> None:
        emit_table([(v.path, v.revision, _size(v.size_bytes),
                     (v.digest or "removed")[:12], v.created_by, when_text(v.created_at))
                    for v in views], ["PATH", "REV", "BYTES", "SHA256", "BY", "SAVED"])

    respond(services(database_url), lambda s: s.scripts.listing(project, prefix,
                                                                 removed=removed),
            as_json, text)


def when_text(instant: str) -> str:
    return instant.replace("T", " ").rstrip("Z").rsplit(".", 1)[0]


@script.command("history")
@project_option
@_path_argument
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True,
              metavar="N", help="At most N revisions, newest first.")
@database_url_option
@json_option
def history(project: str, path: str, limit: int, database_url: str, as_json: bool) -> None:
    """Every revision of a script, newest first (removals too)."""
    def text(views: list[ScriptView]) -> None:
        emit_table([(v.revision, (v.digest or "removed")[:12], _size(v.size_bytes), v.source,
                     v.created_by, when_text(v.created_at)) for v in views],
                   ["REV", "SHA256", "BYTES", "SOURCE", "BY", "SAVED"])

    respond(services(database_url), lambda s: s.scripts.history(project, path, limit),
            as_json, text)


@script.command("diff")
@project_option
@_path_argument
@click.option("--from", "start", type=click.IntRange(0), metavar="N",
              help="From revision N (default: the one before --to; 0: empty).")
@click.option("--to", "end", type=click.IntRange(1), metavar="N",
              help="To revision N (default: the current one).")
@database_url_option
@json_option
def diff(project: str, path: str, start: int | None, end: int | None, database_url: str,
         as_json: bool) -> None:
    """The unified diff between two revisions of a script."""
    def text(view: ScriptDiffView) -> None:
        if not view.diff:
            say(f"revisions {view.from_revision} and {view.to_revision} have the same content")
            return
        sys.stdout.write(view.diff)

    respond(services(database_url), lambda s: s.scripts.diff(project, path, start, end),
            as_json, text)


@script.command("rm")
@project_option
@_path_argument
@click.option("--if-revision", "expected", type=click.IntRange(1), metavar="N",
              help="Remove only if the script is still at revision N.")
@_actor_option
@database_url_option
@json_option
def rm(project: str, path: str, expected: int | None, actor: str | None, database_url: str,
       as_json: bool) -> None:
    """Remove a script. Its history stays; tasks that run it keep running the content they
    pinned until they are published again."""
    who = actor_name(actor or default_actor(), "--actor")
    with services(database_url) as opened:
        view, still = opened.scripts.remove(project, path, who, expected)
    if as_json:
        emit_json({"script": view, "tasks_still_running_it": still})
        return
    say(f"removed {project}/{path} at revision {view.revision}")
    if still:
        warn("these tasks still run its last content: " + ", ".join(still))
