"""`ql env` (a project's environment: named values every Run of its tasks gets) and
`ql secret` (the key its secrets are sealed with); docs/controls/environments.md.

A secret's value never goes on a command line (it would be in `ps` and the shell's history):
`--value` is refused for a secret; give it with `--value-file`, `--from-env` or `--stdin`.
Nothing prints a secret's value.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from qinglong.cli.context import respond, services
from qinglong.cli.output import emit_json, emit_table, say
from qinglong.cli.params import database_url_option, default_actor, json_option, project_option
from qinglong.errors import InvalidInput

if TYPE_CHECKING:
    from qinglong.keyring import SecretKey
    from qinglong.service.project_env import (
        EnvActor,
        EnvChangeView,
        EnvView,
        ProjectEnvironments,
    )

VALUE_FILE_MAX = 64 * 1024


@contextmanager
def environments(database_url: str) -> Iterator[ProjectEnvironments]:
    from qinglong.service.project_env import environments as build

    with services(database_url) as opened:
        yield build(opened)


def cli_actor() -> EnvActor:
    from qinglong.service.project_env import EnvActor

    return EnvActor(username=default_actor()[:64], via="cli")


def _strip_newline(text: str) -> str:
    return text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")


def read_value_file(path: Path, field: str = "value-file") -> str:
    """The text of a regular file of at most VALUE_FILE_MAX bytes, one final newline
    dropped (a device or a pipe is refused before anything is read)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InvalidInput(field, f"cannot read it ({exc.strerror})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InvalidInput(field, "is not a regular file (use --stdin for a pipe)")
        data = os.read(fd, VALUE_FILE_MAX + 1)
    finally:
        os.close(fd)
    if len(data) > VALUE_FILE_MAX:
        raise InvalidInput(field, f"is larger than {VALUE_FILE_MAX} bytes")
    try:
        return _strip_newline(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInput(field, "is not UTF-8 text") from None


def given_value(value: str | None, value_file: Path | None, from_env: str | None,
                stdin: bool) -> tuple[str | None, bool]:
    """The value from whichever one source was given, and whether it was the command line."""
    given = [v for v in (value is not None, value_file is not None, from_env is not None,
                         stdin) if v]
    if len(given) > 1:
        raise InvalidInput("value", "give one of --value, --value-file, --from-env, --stdin")
    if value_file is not None:
        return read_value_file(value_file), False
    if from_env is not None:
        found = os.environ.get(from_env)
        if found is None:
            raise InvalidInput("from-env", f"${from_env} is not set")
        return found, False
    if stdin:
        data = sys.stdin.buffer.read(VALUE_FILE_MAX + 1)
        if len(data) > VALUE_FILE_MAX:
            raise InvalidInput("stdin", f"is larger than {VALUE_FILE_MAX} bytes")
        try:
            return _strip_newline(data.decode("utf-8")), False
        except UnicodeDecodeError:
            raise InvalidInput("stdin", "is not UTF-8 text") from None
    return value, value is not None


def _summary(view: EnvView) -> str:
    if view.revision == 0:
        return f"project {view.project}: no environment yet"
    return (f"project {view.project}: environment revision {view.revision} ({view.digest}), "
            f"{len(view.entries)} entries")


@click.group("env")
def env() -> None:
    """A project's environment: named values (plain or secret) every Run of its tasks gets.

    A task's own environment entry of the same name wins, then the Run's parameters. Every
    change is a new revision, recorded in the audit log; a Run records the revision it ran
    with. Secrets are sealed with the key in $QL_SECRET_KEY or $QL_SECRET_KEY_FILE
    (`ql secret new-key`); their values are never shown."""


@env.command("set")
@click.argument("name")
@project_option
@click.option("--value", help="A plain value (never a secret's: command lines leak).")
@click.option("--value-file", type=click.Path(path_type=Path, dir_okay=False),
              help="Read the value from this file (one final newline dropped).")
@click.option("--from-env", metavar="VAR", help="Take the value from this variable of ql's "
                                                "own environment.")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the value from standard input.")
@click.option("--secret/--plain", default=None,
              help="Seal the value (needs the key) / keep it plain. Default: as it is, or "
                   "plain for a new entry.")
@click.option("--enable/--disable", "enabled", default=None,
              help="Inject it, or keep it but inject nothing. Default: as it is (new: enabled).")
@click.option("--description", help="What it is for (one line).")
@database_url_option
@json_option
def set_entry(name: str, project: str, value: str | None, value_file: Path | None,
              from_env: str | None, from_stdin: bool, secret: bool | None,
              enabled: bool | None, description: str | None, database_url: str,
              as_json: bool) -> None:
    """Set NAME in the project's environment (a new revision, unless nothing changes)."""
    text, on_command_line = given_value(value, value_file, from_env, from_stdin)

    def call(envs: ProjectEnvironments) -> EnvChangeView:
        if on_command_line and (secret or (secret is None and any(
                e.name == name and e.secret for e in envs.show(project).entries))):
            raise InvalidInput("value", "a secret's value never goes on a command line (ps, "
                                        "shell history): use --value-file, --from-env or "
                                        "--stdin")
        return envs.set(project, name, cli_actor(), value=text, secret=secret,
                        enabled=enabled, description=description)

    def show(view: EnvChangeView) -> None:
        verb = "set" if view.changed else "unchanged:"
        say(f"{verb} {name} in {_summary(view)}")

    respond(environments(database_url), call, as_json, show)


@env.command("ls")
@project_option
@database_url_option
@json_option
def list_entries(project: str, database_url: str, as_json: bool) -> None:
    """List the project's environment: names, kinds, flags, descriptions (plain values
    shortened; a secret's value never)."""
    def show(view: EnvView) -> None:
        say(_summary(view))
        if view.entries:
            emit_table([(e.name, "secret" if e.secret else "plain",
                         "yes" if e.enabled else "no",
                         "(secret)" if e.value is None else _short(e.value), e.description)
                        for e in view.entries], ["NAME", "KIND", "ENABLED", "VALUE",
                                                 "DESCRIPTION"])

    respond(environments(database_url), lambda envs: envs.show(project), as_json, show)


def _short(value: str, width: int = 40) -> str:
    return value if len(value) <= width else value[:width - 3] + "..."


@env.command("show")
@click.argument("name")
@project_option
@database_url_option
@json_option
def show_entry(name: str, project: str, database_url: str, as_json: bool) -> None:
    """Show one entry (a secret's value never: its digest only)."""
    from qinglong.errors import NotFound

    with environments(database_url) as envs:
        view = envs.show(project)
    found = next((e for e in view.entries if e.name == name), None)
    if found is None:
        raise NotFound("environment entry", f"{project}/{name}")
    if as_json:
        emit_json(found)
        return
    for label, text in (("name", found.name), ("kind", "secret" if found.secret else "plain"),
                        ("enabled", "yes" if found.enabled else "no"),
                        ("value", "(secret: never shown)" if found.value is None
                         else found.value),
                        ("digest", found.value_digest), ("description", found.description),
                        ("revision", f"{view.revision} ({view.digest})")):
        say(f"{label:<12} {text}")


@env.command("rm")
@click.argument("name")
@project_option
@database_url_option
@json_option
def remove_entry(name: str, project: str, database_url: str, as_json: bool) -> None:
    """Remove NAME from the project's environment (a new revision; earlier revisions keep
    it, sealed)."""
    respond(environments(database_url), lambda envs: envs.remove(project, name, cli_actor()),
            as_json, lambda view: say(f"removed {name} from {_summary(view)}"))


@env.command("history")
@project_option
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--before", type=click.IntRange(1), help="Only revisions before this one.")
@database_url_option
@json_option
def history(project: str, limit: int, before: int | None, database_url: str,
            as_json: bool) -> None:
    """Every revision of the project's environment, newest first: who changed which entry
    and what (value, secret, enabled, description), never a value."""
    respond(environments(database_url),
            lambda envs: envs.history(project, before=before, limit=limit), as_json,
            lambda items: emit_table([(i.revision, i.created_at, i.created_by, i.op, i.name,
                                       ",".join(i.fields), i.entries, (i.digest or "")[:16])
                                      for i in items],
                                     ["REVISION", "AT", "BY", "OP", "NAME", "CHANGED",
                                      "ENTRIES", "DIGEST"]))


@click.group("secret")
def secret() -> None:
    """The key project secrets are sealed with: make one, see which is in use, rotate it.

    A key is one line `qlk1:...` in a file ($QL_SECRET_KEY_FILE, mode 0600) or in
    $QL_SECRET_KEY. Whoever sets a secret and every executor that runs a project with
    secrets needs it; listing names needs no key."""


@secret.command("new-key")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="Write the key to this new file (mode 0600; an existing file is refused).")
def new_key(out: Path) -> None:
    """Make a new random key (256 bits) in a new file; prints its id, never the key."""
    from qinglong.keyring import new_key_text, parse_key

    text = new_key_text()
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise InvalidInput("out", f"cannot create {str(out)!r} ({exc.strerror})") from None
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(text + "\n")
    say(f"wrote key {parse_key(text, 'out').key_id} to {out}")


@secret.command("status")
@database_url_option
@json_option
def status(database_url: str, as_json: bool) -> None:
    """Which key the database's secrets are sealed under, and this process's key."""
    from qinglong.keyring import key_from_environment

    mine = key_from_environment()
    with environments(database_url) as envs:
        stored = envs.key_id()
    found = {"database_key": stored, "process_key": None if mine is None else mine.key_id,
             "matches": stored is None or (mine is not None and mine.key_id == stored)}
    if as_json:
        emit_json(found)
        return
    say(f"database key  {stored or '(no secret stored yet)'}")
    say(f"this process  {found['process_key'] or '(no key: set QL_SECRET_KEY_FILE)'}")


@secret.command("rotate-key")
@click.option("--old-key-file", type=click.Path(path_type=Path, dir_okay=False),
              required=True, help="The key the secrets are sealed under now.")
@click.option("--new-key-file", type=click.Path(path_type=Path, dir_okay=False),
              help="The new key (default: $QL_SECRET_KEY or $QL_SECRET_KEY_FILE).")
@database_url_option
@json_option
def rotate_key(old_key_file: Path, new_key_file: Path | None, database_url: str,
               as_json: bool) -> None:
    """Seal every secret of every revision again under the new key, in one transaction.

    Then give every process the new key (executors first: until they have it, a Run with
    secrets fails to start with QL_SECRET_KEY_MISMATCH, and nothing runs with a partial
    environment)."""
    from qinglong.keyring import read_key_file

    old: SecretKey = read_key_file(old_key_file, "old-key-file")
    new = None if new_key_file is None else read_key_file(new_key_file, "new-key-file")

    def text(view: object) -> None:
        from qinglong.service.project_env import RotationView

        assert isinstance(view, RotationView)
        if view.already:
            say(f"nothing to do: the secrets are under key {view.to_key}")
        else:
            say(f"sealed {view.resealed} secret values again: key {view.from_key} -> "
                f"{view.to_key}")

    respond(environments(database_url), lambda envs: envs.rotate_key(old, new, cli_actor()),
            as_json, text)
