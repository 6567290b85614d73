"""`ql project`: create, list and archive projects."""

from __future__ import annotations

import click

from qinglong.cli.context import backend
from qinglong.cli.output import emit_json, emit_table, rfc3339, say
from qinglong.cli.params import database_url_option, json_option
from qinglong.domain.model import Project
from qinglong.storage.ports import ProjectCreateParams


@click.group()
def project() -> None:
    """Projects group tasks and triggers; archiving one stops its triggers."""


def _row(item: Project) -> dict[str, object]:
    return {
        "id": item.id,
        "name": item.name,
        "status": item.status.value,
        "version": item.version,
        "created_at": rfc3339(item.created_at_ms),
        "updated_at": rfc3339(item.updated_at_ms),
    }


@project.command()
@click.argument("project_id", metavar="PROJECT")
@click.option("--name", help="Display name (defaults to the id).")
@database_url_option
@json_option
def create(project_id: str, name: str | None, database_url: str, as_json: bool) -> None:
    """Create PROJECT (lowercase letters, digits and '-')."""
    with backend(database_url) as store:
        created = store.definitions.project_create(ProjectCreateParams(project_id=project_id, name=name))
    if as_json:
        emit_json(_row(created))
    else:
        say(f"created project {created.id}")


@project.command("list")
@database_url_option
@json_option
def list_projects(database_url: str, as_json: bool) -> None:
    """List projects."""
    with backend(database_url) as store:
        items = store.definitions.project_list()
    if as_json:
        emit_json([_row(item) for item in items])
    else:
        emit_table(
            [(i.id, i.name, i.status.value, rfc3339(i.created_at_ms)) for i in items],
            ["PROJECT", "NAME", "STATUS", "CREATED"],
        )


@project.command()
@click.argument("project_id", metavar="PROJECT")
@database_url_option
@json_option
def archive(project_id: str, database_url: str, as_json: bool) -> None:
    """Archive PROJECT: none of its triggers fire any more."""
    with backend(database_url) as store:
        archived = store.definitions.project_archive(project_id)
    if as_json:
        emit_json(_row(archived))
    else:
        say(f"archived project {archived.id}")
