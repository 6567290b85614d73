"""`ql project`: create, list, archive and unarchive projects."""

from __future__ import annotations

import click

from qinglong.cli.context import catalog, respond
from qinglong.cli.output import emit_table, say
from qinglong.cli.params import actor_option, database_url_option, json_option, pause_options
from qinglong.service.params import ProjectPauseParams
from qinglong.service.views.triggers import TriggerView


@click.group()
def project() -> None:
    """Projects group tasks and triggers; archiving one stops its triggers."""


@project.command()
@click.argument("project_id", metavar="PROJECT")
@click.option("--name", help="Display name (defaults to the id).")
@database_url_option
@json_option
def create(project_id: str, name: str | None, database_url: str, as_json: bool) -> None:
    """Create PROJECT (lowercase letters, digits and '-')."""
    respond(catalog(database_url), lambda cat: cat.project_create(project_id, name), as_json,
            lambda created: say(f"created project {created.id}"))


@project.command("list")
@database_url_option
@json_option
def list_projects(database_url: str, as_json: bool) -> None:
    """List projects."""
    respond(catalog(database_url), lambda cat: cat.project_list(), as_json,
            lambda items: emit_table([(i.id, i.name, i.status, i.created_at) for i in items],
                                     ["PROJECT", "NAME", "STATUS", "CREATED"]))


@project.command()
@click.argument("project_id", metavar="PROJECT")
@database_url_option
@json_option
def archive(project_id: str, database_url: str, as_json: bool) -> None:
    """Archive PROJECT: none of its triggers fire until it is unarchived."""
    respond(catalog(database_url), lambda cat: cat.project_archive(project_id), as_json,
            lambda archived: say(f"archived project {archived.id}"))


@project.command()
@click.argument("project_id", metavar="PROJECT")
@database_url_option
@json_option
def unarchive(project_id: str, database_url: str, as_json: bool) -> None:
    """Restore an archived PROJECT: its triggers fire again.

    Occurrences missed while it was archived are handled as after downtime: those still
    within the misfire grace run; older ones follow each trigger's misfire policy (skip runs
    none of them, fire_once runs one Run, for the earliest)."""
    respond(catalog(database_url), lambda cat: cat.project_unarchive(project_id), as_json,
            lambda restored: say(f"unarchived project {restored.id}"))


@project.command()
@click.argument("project_id", metavar="PROJECT")
@pause_options("Resume by itself at this time: RFC 3339, epoch milliseconds, or a duration "
               "from now (2h). Default: until resumed.",
               "Why, kept with each trigger's pause.")
@database_url_option
@json_option
def pause(project_id: str, until_ms: int | None, reason: str | None, actor: str,
          database_url: str, as_json: bool) -> None:
    """Pause every trigger of PROJECT, as `ql trigger pause` does for one.

    Each trigger gets its own pause (all in one transaction); one already paused gets the new
    end and reason. Triggers published into the project later are not paused."""
    params = ProjectPauseParams(project_id=project_id, actor=actor, until_ms=until_ms,
                                reason=reason)

    def text(views: list[TriggerView]) -> None:
        held = views[0].pause if views else None
        until = ("until resumed" if until_ms is None or held is None
                 else f"until {held.until}")
        say(f"paused {len(views)} trigger(s) of project {project_id} {until}")

    respond(catalog(database_url), lambda cat: cat.project_pause(params), as_json, text)


@project.command()
@click.argument("project_id", metavar="PROJECT")
@actor_option
@database_url_option
@json_option
def resume(project_id: str, actor: str, database_url: str, as_json: bool) -> None:
    """Resume every paused trigger of PROJECT (refused when none is paused)."""
    params = ProjectPauseParams(project_id=project_id, actor=actor)
    respond(catalog(database_url), lambda cat: cat.project_resume(params), as_json,
            lambda views: say(f"resumed the paused triggers of project {project_id}"))
