"""`ql project`: create, list, archive and unarchive projects."""

from __future__ import annotations

import click

from qinglong.cli.context import CLOCK, catalog
from qinglong.cli.output import emit_json, emit_table, say
from qinglong.cli.params import Instant, actor_option, database_url_option, json_option
from qinglong.service.params import ProjectPauseParams


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
    with catalog(database_url) as cat:
        created = cat.project_create(project_id, name)
    if as_json:
        emit_json(created)
    else:
        say(f"created project {created.id}")


@project.command("list")
@database_url_option
@json_option
def list_projects(database_url: str, as_json: bool) -> None:
    """List projects."""
    with catalog(database_url) as cat:
        items = cat.project_list()
    if as_json:
        emit_json(items)
    else:
        emit_table([(i.id, i.name, i.status, i.created_at) for i in items],
                   ["PROJECT", "NAME", "STATUS", "CREATED"])


@project.command()
@click.argument("project_id", metavar="PROJECT")
@database_url_option
@json_option
def archive(project_id: str, database_url: str, as_json: bool) -> None:
    """Archive PROJECT: none of its triggers fire until it is unarchived."""
    with catalog(database_url) as cat:
        archived = cat.project_archive(project_id)
    if as_json:
        emit_json(archived)
    else:
        say(f"archived project {archived.id}")


@project.command()
@click.argument("project_id", metavar="PROJECT")
@database_url_option
@json_option
def unarchive(project_id: str, database_url: str, as_json: bool) -> None:
    """Restore an archived PROJECT: its triggers fire again.

    Occurrences missed while it was archived are handled as after downtime: those still
    within the misfire grace run; older ones follow each trigger's misfire policy (skip runs
    none of them, fire_once runs one Run, for the earliest)."""
    with catalog(database_url) as cat:
        restored = cat.project_unarchive(project_id)
    if as_json:
        emit_json(restored)
    else:
        say(f"unarchived project {restored.id}")


@project.command()
@click.argument("project_id", metavar="PROJECT")
@click.option("--until", "until_ms", type=Instant(ahead=True, now_ms=CLOCK.now_ms), metavar="TIME",
              help="Resume by itself at this time: RFC 3339, epoch milliseconds, or a duration "
                   "from now (2h). Default: until resumed.")
@click.option("--reason", metavar="TEXT", help="Why, kept with each trigger's pause.")
@actor_option
@database_url_option
@json_option
def pause(project_id: str, until_ms: int | None, reason: str | None, actor: str,
          database_url: str, as_json: bool) -> None:
    """Pause every trigger of PROJECT, as `ql trigger pause` does for one.

    Each trigger gets its own pause (all in one transaction); one already paused gets the new
    end and reason. Triggers published into the project later are not paused."""
    with catalog(database_url) as cat:
        views = cat.project_pause(ProjectPauseParams(project_id=project_id, actor=actor,
                                                     until_ms=until_ms, reason=reason))
    if as_json:
        emit_json(views)
    else:
        held = views[0].pause if views else None
        until = ("until resumed" if until_ms is None or held is None
                 else f"until {held.until}")
        say(f"paused {len(views)} trigger(s) of project {project_id} {until}")


@project.command()
@click.argument("project_id", metavar="PROJECT")
@actor_option
@database_url_option
@json_option
def resume(project_id: str, actor: str, database_url: str, as_json: bool) -> None:
    """Resume every paused trigger of PROJECT (refused when none is paused)."""
    with catalog(database_url) as cat:
        views = cat.project_resume(ProjectPauseParams(project_id=project_id, actor=actor))
    if as_json:
        emit_json(views)
    else:
        say(f"resumed the paused triggers of project {project_id}")
