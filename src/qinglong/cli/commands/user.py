"""`ql user`: the accounts of the HTTP API and the panel (the first admin is made here)."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from qinglong.cli.context import respond, services
from qinglong.cli.output import emit_table, say
from qinglong.cli.params import database_url_option, default_actor, json_option
from qinglong.errors import InvalidInput

if TYPE_CHECKING:  # argon2 loads only when an account command runs
    from qinglong.service.accounts import Accounts, Principal
    from qinglong.service.container import Services
    from qinglong.service.views.accounts import UserView
    from qinglong.service.views.second_factor import SecondFactorView

PASSWORD_ENV = "QL_USER_PASSWORD"  # noqa: S105 - the variable's name, not a password
PASSWORD_FILE_MAX = 4096  # bytes: a 1024-character password in UTF-8, and its newline
F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def accounts(database_url: str, unit: str | None = None) -> Iterator[Accounts]:
    """The accounts of ``database_url``; with ``unit``, every change the block makes (the
    change and its audit row) commits together when the block ends, or none does."""
    with services(database_url) as opened:
        if unit is None:
            yield opened.accounts
            return
        with opened.transaction(unit):
            yield opened.accounts


def cli_principal() -> Principal:
    """Who runs the command, as the audit log records it."""
    from qinglong.service.accounts import Principal

    return Principal(username=default_actor()[:64], role="admin", via="cli")


def read_password(password_file: Path | None, *, username: str | None = None,
                  prompt: bool = True) -> str:
    """From --password-file (its first line), else $QL_USER_PASSWORD, else a prompt (twice)
    when a terminal is attached; never from the command line itself."""
    from qinglong.service.passwords import check_password

    if password_file is not None:
        return check_password(first_line(password_file), "--password-file", username=username)
    from_env = os.environ.get(PASSWORD_ENV)
    if from_env is not None:
        return check_password(from_env, f"${PASSWORD_ENV}", username=username)
    if not prompt or not sys.stdin.isatty():
        raise InvalidInput("password-file", f"give the password in a file (--password-file) or "
                                            f"in ${PASSWORD_ENV}, or run in a terminal to be "
                                            "asked for it")
    value: str = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    return check_password(value, "password", username=username)


def first_line(path: Path) -> str:
    """The first line of a regular file of at most PASSWORD_FILE_MAX bytes. A device (such as
    /dev/zero), a pipe or a directory is refused before anything is read, a larger file after
    PASSWORD_FILE_MAX + 1 bytes: a wrong path cannot make us read until memory runs out."""
    field = "password-file"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InvalidInput(field, f"cannot read it ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidInput(field, "is not a regular file (a device, pipe or directory): put "
                                      f"the password in a file, or use ${PASSWORD_ENV}")
        data = b""
        while len(data) <= PASSWORD_FILE_MAX and (
                chunk := os.read(fd, PASSWORD_FILE_MAX + 1 - len(data))):
            data += chunk
    finally:
        os.close(fd)
    if len(data) > PASSWORD_FILE_MAX:
        raise InvalidInput(field, f"is larger than {PASSWORD_FILE_MAX} bytes: it holds the "
                                  "password on its first line")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(field, "is not UTF-8 text") from None
    return text.splitlines()[0] if text else ""


def password_file_option(func: F) -> F:
    return click.option(
        "--password-file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
        help=f"Read the password from FILE's first line (a regular file of at most "
             f"{PASSWORD_FILE_MAX} bytes; else ${PASSWORD_ENV}, else a prompt)."
    )(func)


@click.group()
def user() -> None:
    """Users of the HTTP API and the panel: viewer (reads), operator (also runs, cancels,
    pauses, enables and disables), admin (also publishes, deletes, manages users and tokens).
    On PostgreSQL, connect as ql_web."""


@user.command()
@click.option("--username", required=True, metavar="NAME",
              help="Lowercase letters, digits, '.', '_', '@' and '-'.")
@click.option("--role", required=True, type=click.Choice(["admin", "operator", "viewer", "none"]),
              help="The role on every project; none: only the projects granted "
                   "(`ql user grant`).")
@password_file_option
@database_url_option
@json_option
def create(username: str, role: str, password_file: Path | None, database_url: str,
           as_json: bool) -> None:
    """Create a user (the first admin bootstraps the API). The password (10+ characters, not a
    common or easily guessed one: docs/security.md#passwords) is hashed with argon2; it never
    appears on the command line."""
    password = read_password(password_file, username=username)

    def call(opened: Accounts) -> UserView:
        view = opened.user_create(username, role, password)
        opened.audit(cli_principal(), "user.create", target=f"user {username}",
                     detail={"role": role})
        return view

    respond(accounts(database_url, unit="create user"), call, as_json,
            lambda view: say(f"created {role} {username}"))


@user.command("list")
@database_url_option
@json_option
def list_users(database_url: str, as_json: bool) -> None:
    """List users (never their password hashes)."""
    respond(accounts(database_url), lambda opened: opened.user_list(), as_json,
            lambda views: emit_table([(v.username, v.role, "disabled" if v.disabled else "enabled",
                                       v.created_at) for v in views],
                                     ["USER", "ROLE", "STATE", "CREATED"]))


@user.command()
@click.option("--username", required=True, metavar="NAME")
@click.option("--role", type=click.Choice(["admin", "operator", "viewer", "none"]),
              help="A new role on every project (none: only the projects granted).")
@click.option("--new-password", is_flag=True,
              help="Set a new password (from --password-file, $QL_USER_PASSWORD or a prompt); "
                   "ends the user's sessions and revokes the user's tokens.")
@password_file_option
@click.option("--disable/--enable", "disabled", default=None,
              help="Disable (ends sessions, revokes tokens) or enable the user again (the "
                   "revoked tokens stay revoked).")
@database_url_option
@json_option
def update(username: str, role: str | None, new_password: bool, password_file: Path | None,
           disabled: bool | None, database_url: str, as_json: bool) -> None:
    """Change a user's role, password or state."""
    if role is None and not new_password and disabled is None:
        raise click.UsageError("give --role, --new-password, --disable or --enable")
    if password_file is not None and not new_password:
        raise click.UsageError("--password-file goes with --new-password")
    password = read_password(password_file, username=username) if new_password else None

    def call(opened: Accounts) -> UserView:
        principal = cli_principal()
        view = opened.user_update(username, role=role, password=password, disabled=disabled,
                                  by=principal.username)
        opened.audit(principal, "user.update", target=f"user {username}",
                     detail={"role": role, "password_changed": password is not None,
                             "disabled": disabled})
        return view

    respond(accounts(database_url, unit="update user"), call, as_json,
            lambda view: say(f"updated {username}: {view.role}, "
                             f"{'disabled' if view.disabled else 'enabled'}"))


@user.command("reset-second-factor")
@click.option("--username", required=True, metavar="NAME")
@database_url_option
@json_option
def reset_second_factor(username: str, database_url: str, as_json: bool) -> None:
    """Remove a user's second factor (a lost phone and no recovery code left): they log in
    with the password alone, and enrol again on the panel's Account page."""
    from qinglong.service.accounts import check_username

    name = check_username(username)
    removed: list[bool] = []

    def call(opened: Services) -> SecondFactorView:
        with opened.transaction("reset second factor"):
            found, view = opened.second_factor.reset(name)
            opened.accounts.audit(cli_principal(), "second-factor.reset",
                                  target=f"user {name}", detail={"removed": found})
        removed.append(found)
        return view

    respond(services(database_url), call, as_json,
            lambda view: say(f"{name}: second factor removed" if removed[0]
                             else f"{name} had no second factor"))


@user.command("reseal-second-factors")
@click.option("--old-key-file", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="The key the second factors are sealed under now.")
@database_url_option
@json_option
def reseal_second_factors(old_key_file: Path, database_url: str, as_json: bool) -> None:
    """Seal every user's second factor again under this process's key ($QL_SECRET_KEY or
    $QL_SECRET_KEY_FILE), in one transaction: run it after `ql secret rotate-key`, which
    reseals the project secrets only."""
    from qinglong.keyring import read_key_file

    old = read_key_file(old_key_file, "old-key-file")

    def call(opened: Services) -> dict[str, object]:
        with opened.transaction("seal second factors again"):
            count = opened.second_factor.reseal(old)
            opened.accounts.audit(cli_principal(), "second-factor.reseal",
                                  target="second factors", detail={"from": old.key_id,
                                                                   "resealed": count})
        return {"from_key": old.key_id, "resealed": count}

    respond(services(database_url), call, as_json,
            lambda found: say(f"sealed {found['resealed']} second factors again (they were "
                              f"under key {found['from_key']})"))
