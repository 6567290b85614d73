"""`ql project`: create, list, archive and unarchive projects."""

from __future__ import annotations

import click

from qinglong.cli.context import catalog
from qinglong.cli.output import emit_json, emit_table, say
from qinglong.cli.params import database_url_option, json_option


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
        say(f"created project {created['id']}")


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
        emit_table([(i["id"], i["name"], i["status"], i["created_at"]) for i in items],
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
        say(f"archived project {archived['id']}")


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
        say(f"unarchived project {restored['id']}")
