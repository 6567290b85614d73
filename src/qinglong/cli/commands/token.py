"""`ql token`: API tokens (shown once at creation, stored only as a digest)."""

from __future__ import annotations

import click

from qinglong.cli.commands.user import accounts, cli_principal
from qinglong.cli.output import emit_json, emit_table, say, warn
from qinglong.cli.params import DURATION, database_url_option, json_option


@click.group()
def token() -> None:
    """API tokens: `Authorization: Bearer qlt_...` on every request. A token's scope (read,
    operate, admin) can only narrow its user's roles, and --project limits it to projects.
    On PostgreSQL, connect as ql_web."""


@token.command()
@click.option("--username", required=True, metavar="NAME", help="Whose token.")
@click.option("--name", required=True, metavar="TEXT", help="What it is for.")
@click.option("--scope", required=True, type=click.Choice(["read", "operate", "admin"]))
@click.option("--expires-in", type=DURATION, metavar="DURATION",
              help="Lifetime, e.g. 30d (default: until revoked).")
@click.option("--project", "projects", multiple=True, metavar="PROJECT",
              help="Limit the token to this project (repeat for more); it then reaches nothing "
                   "outside them. Default: every project its user may reach.")
@database_url_option
@json_option
def create(username: str, name: str, scope: str, expires_in: int | None,
           projects: tuple[str, ...], database_url: str, as_json: bool) -> None:
    """Create a token and print it: this is the only time it is shown."""
    with accounts(database_url, unit="create token") as opened:
        view = opened.token_create(username, name=name, scope=scope, lifetime_ms=expires_in,
                                   projects=list(projects) if projects else None)
        opened.audit(cli_principal(), "token.create", target=f"token {view.id}",
                     detail={"username": username, "name": name, "scope": scope,
                             "projects": view.projects})
    if as_json:
        emit_json(view)
        return
    say(view.token)
    warn(f"token {view.id} ({scope}) for {username}: store it now, it is not shown again")


@token.command("list")
@click.option("--username", metavar="NAME", help="Only this user's tokens (default: all).")
@database_url_option
@json_option
def list_tokens(username: str | None, database_url: str, as_json: bool) -> None:
    """List tokens (never the tokens themselves)."""
    with accounts(database_url) as opened:
        views = opened.token_list(username)
    if as_json:
        emit_json(views)
        return
    emit_table([(v.id, v.username, v.name, v.scope, v.state,
                 v.expires_at or "-", v.last_used_at or "-") for v in views],
               ["ID", "USER", "NAME", "SCOPE", "STATE", "EXPIRES", "LAST USED"])


@token.command()
@click.argument("token_id", metavar="ID")
@database_url_option
@json_option
def revoke(token_id: str, database_url: str, as_json: bool) -> None:
    """Revoke token ID (the 16 characters after qlt_): it stops working at once."""
    with accounts(database_url, unit="revoke token") as opened:
        principal = cli_principal()
        view = opened.token_revoke(token_id, principal.username)
        opened.audit(principal, "token.revoke", target=f"token {token_id}",
                     detail={"username": view.username})
    if as_json:
        emit_json(view)
    else:
        say(f"revoked token {token_id} of {view.username}")
