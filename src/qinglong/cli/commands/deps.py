"""`ql deps`: a project's dependency set -- the Python requirements and Node packages its
scripts need (docs/dependencies.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from qinglong.cli.commands.manual import default_actor
from qinglong.cli.context import services
from qinglong.cli.output import emit_json, emit_table, say, when
from qinglong.cli.params import database_url_option, json_option, project_option
from qinglong.domain.deps import INSTALL_TASK, DepsRevision
from qinglong.domain.manual import actor_name
from qinglong.ids import new_uuid

F = TypeVar("F", bound=Callable[..., Any])


@click.group()
def deps() -> None:
    """A project's dependency set: Python requirements (pip) and Node packages (npm) its
    scripts run with. Every change is a revision with a SHA-256 digest of the whole set. A
    worker builds the set's environment into its own cache, keyed by that digest, in a Run of
    the project's install task (ql deps install) or, where it has not yet, first thing in a
    script Run of the project; a failed install leaves the previous environment serving."""


def _specs(func: F) -> F:
    func = click.option("--node", multiple=True, metavar="SPEC",
                        help="A Node package: axios, axios@1, @scope/pkg@^2 or "
                             "pkg@file:/abs/pkg.tgz (repeatable).")(func)
    return click.option("--python", multiple=True, metavar="SPEC",
                        help="A Python requirement: requests, 'requests==2.32.*', "
                             "'pkg[extra]>=1,<2' (repeatable).")(func)


def _actor(func: F) -> F:
    return click.option("--actor", envvar="QL_ACTOR", metavar="NAME",
                        help="Who changes it, for the history (default: the OS user; "
                             "$QL_ACTOR).")(func)


def _say_change(project: str, found: tuple[DepsRevision, bool]) -> None:
    revision, changed = found
    if not changed:
        say(f"{project}: the set is unchanged (revision {revision.revision}, sha256 "
            f"{revision.digest[:12]})")
        return
    say(f"{project}: dependency set revision {revision.revision}, sha256 "
        f"{revision.digest[:12]}; install it with ql deps install --project {project}")


def _json(found: tuple[DepsRevision, bool]) -> dict[str, object]:
    return {**found[0].to_json(), "changed": found[1]}


@deps.command("add")
@project_option
@_specs
@_actor
@database_url_option
@json_option
def add(project: str, python: tuple[str, ...], node: tuple[str, ...], actor: str | None,
        database_url: str, as_json: bool) -> None:
    """Add packages to the set (a package already in it takes the new specifier)."""
    who = actor_name(actor or default_actor(), "--actor")
    with services(database_url) as opened:
        found = opened.deps.add(project, python, node, who)
    if as_json:
        emit_json(_json(found))
    else:
        _say_change(project, found)


@deps.command("rm")
@project_option
@_specs
@_actor
@database_url_option
@json_option
def rm(project: str, python: tuple[str, ...], node: tuple[str, ...], actor: str | None,
       database_url: str, as_json: bool) -> None:
    """Remove packages from the set (by name: --python requests --node axios)."""
    who = actor_name(actor or default_actor(), "--actor")
    with services(database_url) as opened:
        found = opened.deps.remove(project, python, node, who)
    if as_json:
        emit_json(_json(found))
    else:
        _say_change(project, found)


@deps.command("ls")
@project_option
@database_url_option
@json_option
def ls(project: str, database_url: str, as_json: bool) -> None:
    """The packages of the project's current set."""
    with services(database_url) as opened:
        current = opened.deps.show(project)
    rows = [] if current is None else (
        [("python", spec) for spec in current.deps.python]
        + [("node", spec) for spec in current.deps.node])
    if as_json:
        emit_json([{"language": lang, "spec": spec} for lang, spec in rows])
        return
    emit_table(rows, ["LANGUAGE", "SPEC"])


@deps.command("show")
@project_option
@database_url_option
@json_option
def show(project: str, database_url: str, as_json: bool) -> None:
    """The project's current set: its revision, digest and packages."""
    with services(database_url) as opened:
        current = opened.deps.show(project)
    if as_json:
        emit_json(None if current is None else current.to_json())
        return
    if current is None:
        say(f"{project} has no dependency set (ql deps add --project {project} --python ...)")
        return
    for label, value in (("revision", str(current.revision)), ("digest", current.digest),
                         ("changed", f"{when(current.created_at_ms)} by {current.actor}"),
                         ("python", " ".join(current.deps.python) or "-"),
                         ("node", " ".join(current.deps.node) or "-"),
                         ("install", f"task {INSTALL_TASK} (ql deps install)")):
        say(f"{label:<9}{value}")


@deps.command("history")
@project_option
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@database_url_option
@json_option
def history(project: str, limit: int, database_url: str, as_json: bool) -> None:
    """The set's revisions, newest first."""
    with services(database_url) as opened:
        found = opened.deps.history(project, limit)
    if as_json:
        emit_json([r.to_json() for r in found])
        return
    emit_table([(r.revision, r.digest[:12], when(r.created_at_ms), r.actor,
                 len(r.deps.python), len(r.deps.node)) for r in found],
               ["REVISION", "DIGEST", "CHANGED", "BY", "PYTHON", "NODE"])


@deps.command("install")
@project_option
@_actor
@database_url_option
@json_option
def install(project: str, actor: str | None, database_url: str, as_json: bool) -> None:
    """Install now: admit a Run of the project's install task, which installs the current
    set on the worker that runs it (follow it with ql run show / ql run logs)."""
    who = actor_name(actor or default_actor(), "--actor")
    with services(database_url) as opened:
        run_id = opened.deps.install(project, who, new_uuid())
    if as_json:
        emit_json({"run": run_id})
        return
    say(f"install of {project}'s dependencies admitted as Run {run_id}")
