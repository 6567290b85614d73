"""Shared CLI options and parameter types (durations, database URL, --json)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import click

from qinglong.cli.context import CLOCK
from qinglong.domain.durations import parse_duration_ms
from qinglong.errors import InvalidInput
from qinglong.profiles.open import DEFAULT_DATABASE_URL
from qinglong.security import check_url_has_no_password

F = TypeVar("F", bound=Callable[..., Any])


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


class Instant(click.ParamType[int]):
    """An RFC 3339 time (with an offset or Z) or epoch milliseconds; with ``ago``, also a
    duration back from now (``1h`` is an hour ago)."""

    name = "time"

    def __init__(self, *, ago: bool = False, ahead: bool = False,
                 now_ms: Callable[[], int] | None = None) -> None:
        self._ago = ago
        self._ahead = ahead
        self._now_ms = now_ms

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from qinglong.domain.occurrences import LAST_INSTANT_MS

        millis = self._millis(value, param, ctx)
        if millis is None or not 0 <= millis <= LAST_INSTANT_MS:
            self.fail(f"{str(value).strip()[:40]!r} is not between 1970 and 9999", param, ctx)
        return millis

    def _millis(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int | None:
        """Epoch milliseconds (None: digits too many for any)."""
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if text.isascii() and text.isdigit():
            return int(text) if len(text) <= 20 else None
        if (self._ago or self._ahead) and self._now_ms is not None:
            try:
                span = parse_duration_ms(text)
            except ValueError:
                pass
            else:
                return self._now_ms() + (span if self._ahead else -span)
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            hint = (", or a duration ago such as 1h" if self._ago
                    else ", or a duration from now such as 2h" if self._ahead else "")
            self.fail(f"{text!r} is not an RFC 3339 time (e.g. 2026-03-08T09:00:00Z) or epoch "
                      f"milliseconds{hint}", param, ctx)
        if parsed.tzinfo is None:
            self.fail(f"{text!r} needs a UTC offset or Z", param, ctx)
        return int(parsed.timestamp() * 1000)


class WholeSecond(click.ParamType[int]):
    """An instant as a whole second: RFC 3339 with an offset (``2026-12-24T18:00:00+08:00``),
    epoch milliseconds (a multiple of 1000), or a duration from now (``10m``, rounded up to
    the next whole second), in epoch milliseconds."""

    name = "time"

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from qinglong.domain.occurrences import check_instant, parse_instant

        if isinstance(value, int):
            return value
        text = str(value).strip()
        try:
            span = parse_duration_ms(text)
        except ValueError:
            pass
        else:
            try:
                return check_instant(-(-(self._now_ms() + span) // 1000) * 1000, "time")
            except InvalidInput as exc:
                self.fail(f"{text!r}: {exc.rule}", param, ctx)
        try:
            return parse_instant(text, "time")
        except InvalidInput as exc:
            self.fail(exc.rule if text in exc.rule else f"{text!r}: {exc.rule}", param, ctx)


class WholeSeconds(Duration):
    """A duration of whole seconds (``90s``, ``1h30m``, ``1d``), in seconds."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        span = super().convert(value, param, ctx)
        if span % 1000:
            self.fail(f"{value!r} is not a whole number of seconds", param, ctx)
        return span // 1000


def default_actor() -> str:
    """Who is asking: $QL_ACTOR, else the operating-system user."""
    import getpass
    import os

    try:
        return os.environ.get("QL_ACTOR") or getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid (some containers)
        return f"uid:{os.getuid()}"


def actor_option(func: F) -> F:
    return click.option(
        "--actor", metavar="NAME", default=default_actor, show_default="$QL_ACTOR or your user name",
        help="Who is asking, recorded with the action.")(func)


def setting_option(name: str, kind: Any, text: str) -> Callable[[F], F]:
    """A setting of a long-running process (`ql control`, `ql worker`): None when not given,
    so the process's own default, or its environment variable, applies."""
    return click.option(name, type=kind, default=None, help=text)


def json_events_option(func: F) -> F:
    """--json-events of the long-running commands."""
    return click.option("--json-events", is_flag=True,
                        help="Print every event as one JSON line.")(func)


def pause_options(until_help: str, reason_help: str) -> Callable[[F], F]:
    """--until, --reason and --actor of `ql trigger pause` and `ql project pause` (the help
    says what each pauses)."""

    def decorate(func: F) -> F:
        func = actor_option(func)
        func = click.option("--reason", metavar="TEXT", help=reason_help)(func)
        return click.option("--until", "until_ms", type=Instant(ahead=True, now_ms=CLOCK.now_ms),
                            metavar="TIME", help=until_help)(func)

    return decorate

