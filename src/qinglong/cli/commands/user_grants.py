"""`ql user grant|revoke|grants`: per-project roles (docs/security.md "Tenants"). A user's
role on every project is `ql user create|update --role` (none: only what grants give)."""

from __future__ import annotations

import click

from qinglong.cli.commands.user import cli_principal, user
from qinglong.cli.context import services
from qinglong.cli.output import emit_json, emit_table, say
from qinglong.cli.params import database_url_option, json_option

GRANT_ROLES = ("viewer", "operator", "admin")


@user.command()
@click.option("--username", required=True, metavar="NAME")
@click.option("--project", required=True, metavar="PROJECT")
@click.option("--role", required=True, type=click.Choice(GRANT_ROLES),
              help="The role on that project (replaces the one held there).")
@database_url_option
@json_option
def grant(username: str, project: str, role: str, database_url: str, as_json: bool) -> None:
    """Give a user a role on one project (on top of the user's role on every project)."""
    with services(database_url) as opened, opened.transaction("grant a project role"):
        view = opened.grants.put(username, project, role, cli_principal().username)
        opened.accounts.audit(cli_principal(), "grant.put", project=project,
                              target=f"user {username}", detail={"role": role})
    if as_json:
        emit_json(view)
    else:
        say(f"{view.username} is {view.role} on project {view.project}")


@user.command()
@click.option("--username", required=True, metavar="NAME")
@click.option("--project", required=True, metavar="PROJECT")
@database_url_option
def revoke(username: str, project: str, database_url: str) -> None:
    """Take a user's role on one project back."""
    with services(database_url) as opened, opened.transaction("take a project role back"):
        opened.grants.remove(username, project)
        opened.accounts.audit(cli_principal(), "grant.remove", project=project,
                              target=f"user {username}")
    say(f"{username} holds no role on project {project} now")


@user.command()
@click.option("--project", required=True, metavar="PROJECT")
@database_url_option
@json_option
def grants(project: str, database_url: str, as_json: bool) -> None:
    """List who holds a role on one project (besides the roles on every project)."""
    with services(database_url) as opened:
        found = opened.grants.on_project(project)
    if as_json:
        emit_json(found)
    else:
        emit_table([(v.username, v.role, v.granted_by, v.granted_at) for v in found],
                   ["USER", "ROLE", "GRANTED BY", "AT"])
