"""`ql web`: the HTTP API on its own, stateless (any number behind a load balancer)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from qinglong.cli.context import CLOCK
from qinglong.cli.params import DURATION, check_cli_url
from qinglong.cli.sso_options import sso_options
from qinglong.cli.stop_signals import StopSignals
from qinglong.diagnostics import Diagnostic
from qinglong.profiles.open import DEFAULT_DATABASE_URL
from qinglong.security import redact_url

if TYPE_CHECKING:
    from qinglong.service.sso_settings import SsoSettings

DEFAULT_LISTEN = "127.0.0.1:8080"
F = TypeVar("F", bound=Callable[..., Any])


def trusted_proxy_option(func: F) -> F:
    """``--trusted-proxy`` (repeatable), for `ql web` and `ql serve --http`."""
    return click.option(
        "--trusted-proxy", "trusted_proxies", multiple=True, metavar="ADDRESS",
        help="A reverse proxy (IP address or CIDR network; repeatable) whose X-Forwarded-For "
             "and X-Forwarded-Proto are believed. Default: none, not even loopback: the client "
             "is the peer address.")(func)


def second_factor_option(func: F) -> F:
    """``--require-second-factor ROLE``, for `ql web` and `ql serve --http`."""
    return click.option(
        "--require-second-factor", type=click.Choice(["viewer", "operator", "admin"]),
        envvar="QL_REQUIRE_SECOND_FACTOR", metavar="ROLE",
        help="Users of ROLE and above must log in with a second factor (TOTP): until they "
             "enrol one, their password session may only enrol; a single-sign-on session is "
             "not gated (require multi-factor at the provider) (env QL_REQUIRE_SECOND_FACTOR; "
             "give every server of a database the same; docs/security.md#second-factor).")(func)


def _stamp() -> str:
    return datetime.fromtimestamp(CLOCK.now_ms() / 1000, UTC).strftime("%H:%M:%S.%f")[:-3]


def _diagnostic(diagnostic: Diagnostic) -> None:
    click.echo(f"{_stamp()} error {diagnostic.source} {diagnostic.code}: {diagnostic.message}",
               err=True)


@click.command()
@click.option("--database-url", envvar="QL_DATABASE_URL", default=DEFAULT_DATABASE_URL,
              show_default=True, metavar="URL",
              help="postgresql:// URL of the ql_web role (env QL_DATABASE_URL), or a sqlite:/// "
                   "file. No passwords here: use PGPASSWORD, ~/.pgpass or "
                   "QL_DATABASE_PASSWORD_FILE.")
@click.option("--http", "listen", envvar="QL_WEB_HTTP", default=DEFAULT_LISTEN,
              show_default=True, metavar="HOST:PORT", help="Where the API listens.")
@click.option("--allow-remote", is_flag=True,
              help="Allow a HOST that is not loopback (then put TLS in front, with "
                   "--trusted-proxy: the session cookie is Secure, so a browser login over "
                   "plain HTTP to an address that is not loopback is refused, saying why).")
@trusted_proxy_option
@click.option("--name", metavar="NAME",
              help="This server's name among the processes of the database (default: "
                   "web:HOST:PID).")
@click.option("--pool-size", type=click.IntRange(1, 64), default=8, show_default=True,
              help="Database connections (PostgreSQL).")
@click.option("--session-lifetime", type=DURATION, default="12h", show_default=True,
              help="A login lasts at most this long.")
@click.option("--session-idle", type=DURATION, default="1h", show_default=True,
              help="A login ends after this long without a request (at least 1m).")
@second_factor_option
@sso_options
def web(database_url: str, listen: str, allow_remote: bool, trusted_proxies: tuple[str, ...],
        name: str | None, pool_size: int, session_lifetime: int, session_idle: int,
        require_second_factor: str | None, sso: SsoSettings | None) -> None:
    """Serve the HTTP API (/api/v1, OpenAPI at /api/v1/openapi.json) until SIGINT or SIGTERM.

    Stateless: sessions, tokens, login limits and the audit log live in the database, so any
    number can serve one database. On PostgreSQL connect as ql_web (its readiness is checked
    first); `ql serve --http` serves the same API inside the SQLite server. Create the first
    admin with `ql user create --role admin`.
    """
    from qinglong.domain.identifiers import owner_id
    from qinglong.errors import InvalidConfig
    from qinglong.profiles.web import open_and_serve
    from qinglong.service.accounts import SessionPolicy
    from qinglong.service.second_factor import SecondFactorPolicy
    from qinglong.web.server import check_bind, instance_name
    from qinglong.web.transport import parse_trusted_proxies

    check_cli_url(database_url)
    check_bind(listen, allow_remote)
    trusted = parse_trusted_proxies(trusted_proxies)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: "
                                                      "%(message)s")
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    if session_idle < 60_000 or session_lifetime < session_idle:
        raise InvalidConfig("--session-idle", "must be at least 1m and at most --session-lifetime")
    instance = owner_id(instance_name(name), "--name")
    stop = threading.Event()

    def on_repeat() -> None:
        raise SystemExit(130)

    with StopSignals(stop, on_repeat):
        running = open_and_serve(
            database_url, CLOCK, listen, pool_size=pool_size, instance_id=instance,
            session_policy=SessionPolicy(lifetime_ms=session_lifetime, idle_ms=session_idle),
            second_factor=SecondFactorPolicy(require_second_factor),
            diagnostics=_diagnostic, trusted_proxies=trusted, sso=sso)
        host = listen.rpartition(":")[0]
        click.echo(f"{_stamp()} serving the API on http://{host}:{running.port}/api/v1 "
                   f"as {instance} (database {redact_url(database_url)}); Ctrl-C to stop",
                   err=False)
        try:
            while not stop.wait(0.5):
                pass
        finally:
            running.stop()
    click.echo(f"{_stamp()} stopped")
