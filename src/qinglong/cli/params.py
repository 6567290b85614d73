"""Shared CLI options and parameter types (durations, database URL, --json)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

import click

from qinglong.errors import InvalidInput
from qinglong.profiles.backends import DEFAULT_DATABASE_URL
from qinglong.security import check_url_has_no_password

F = TypeVar("F", bound=Callable[..., Any])

_DURATION = re.compile(r"\s*(\d{1,15}(?:\.\d{1,6})?)\s*(ms|s|m|h|d)\s*")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(text: str) -> int:
    match = _DURATION.fullmatch(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration; use a number with a unit: 500ms, 30s, 5m, 2h, 1d")
    value = float(match.group(1)) * _UNIT_MS[match.group(2)]
    if value != int(value):
        raise ValueError(f"{text!r} is not a whole number of milliseconds")
    return int(value)


class Duration(click.ParamType[int]):
    """A duration with a unit, converted to milliseconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_duration_ms(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DURATION = Duration()


def _no_password_on_command_line(ctx: click.Context, param: click.Parameter, value: str) -> str:
    source = ctx.get_parameter_source(param.name or "")
    if source is click.core.ParameterSource.COMMANDLINE:
        try:
            check_url_has_no_password(value)
        except InvalidInput as exc:
            raise click.BadParameter(exc.rule, ctx, param) from None
    return value


def check_cli_url(value: str | None) -> None:
    """A URL given on the command line must not carry a password."""
    if value is not None:
        try:
            check_url_has_no_password(value)
        except InvalidInput as exc:
            raise click.BadParameter(exc.rule, param_hint="'--database-url'") from None


_URL_HELP = ("sqlite:///path.db or postgresql://user@host:port/db (env QL_DATABASE_URL). "
             "Passwords come from PGPASSWORD, ~/.pgpass or QL_DATABASE_PASSWORD_FILE, "
             "never from the command line.")
_SQLITE_URL_HELP = ("sqlite:///path.db (env QL_DATABASE_URL); for PostgreSQL run `ql control`.")


def _url_option(help_text: str) -> Callable[[F], F]:
    def decorate(func: F) -> F:
        return click.option(
            "--database-url",
            callback=_no_password_on_command_line,
            envvar="QL_DATABASE_URL",
            default=DEFAULT_DATABASE_URL,
            show_default=True,
            metavar="URL",
            help=help_text,
        )(func)

    return decorate


database_url_option = _url_option(_URL_HELP)
sqlite_url_option = _url_option(_SQLITE_URL_HELP)  # commands that only run on SQLite


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(func)


def project_option(func: F) -> F:
    return click.option("--project", "project", required=True, metavar="PROJECT", help="Project id.")(
        func
    )
