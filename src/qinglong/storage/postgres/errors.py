"""Translate psycopg failures into the qinglong error hierarchy (one place).

Whether a connection is lost is judged from the connection's state, not from the
exception class: 25P03 (idle-in-transaction timeout), 25P04 (transaction timeout),
57P01 (terminated) and a closed socket all arrive as different classes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pg_errors

from qinglong.errors import (
    Conflict,
    ConnectionLost,
    PermissionDenied,
    QinglongError,
    ServerNotWritable,
    StorageError,
    TransientStorageError,
)
from qinglong.storage.postgres.roles import ADMIN, APP_ROLES, PRIVILEGES, RUNTIME, WEB, WORKER

RETRYABLE_SQLSTATES = frozenset({"40001", "40P01", "55P03"})
CONNECTION_SQLSTATES = frozenset({"25P03", "25P04", "57P01", "57P02", "57P03", "57P04"})
READ_ONLY_SQLSTATE = "25006"
CONFLICT_SQLSTATES = frozenset({"23505", "23503", "23514"})


def sqlstate(exc: BaseException) -> str | None:
    return getattr(exc, "sqlstate", None)


def connection_gone(conn: psycopg.Connection[object] | None, exc: BaseException | None = None) -> bool:
    """True when this connection can no longer be used (the state decides, not the class)."""
    if conn is not None and (conn.closed or conn.broken):
        return True
    if exc is None:
        return False
    state = sqlstate(exc)
    if state is not None and (state.startswith("08") or state in CONNECTION_SQLSTATES):
        return True
    return isinstance(exc, psycopg.OperationalError) and state is None


def is_retryable(exc: BaseException) -> bool:
    return sqlstate(exc) in RETRYABLE_SQLSTATES


def translate(
    exc: BaseException, action: str, conn: psycopg.Connection[object] | None = None
) -> QinglongError:
    state = sqlstate(exc)
    if connection_gone(conn, exc):
        return ConnectionLost(f"{action}: the database connection was lost")
    if state == READ_ONLY_SQLSTATE:
        return ServerNotWritable(f"{action}: the server is read-only")
    if state in RETRYABLE_SQLSTATES:
        return TransientStorageError(f"{action}: transient database conflict ({state})")
    if state == "42501" or isinstance(exc, pg_errors.InsufficientPrivilege):
        return PermissionDenied(_permission_denied(exc, action, conn))
    if state in CONFLICT_SQLSTATES:
        return Conflict(f"{action}: the database refused a duplicate or inconsistent row ({state})")
    if isinstance(exc, pg_errors.QueryCanceled):
        return TransientStorageError(f"{action}: statement timeout ({state})")
    return StorageError(f"{action}: PostgreSQL error ({state or type(exc).__name__})")


_DENIED_TABLE = re.compile(r"permission denied for (?:table|relation|view) \"?([a-z_]+)\"?$")
# which role each command is made for, when the object refused does not say it
_ROLE_FOR_COMMAND = (f"{ADMIN} to publish, {RUNTIME} for `ql control` and backfills, {WORKER} "
                     f"for `ql worker`, {WEB} for `ql web`")


def roles_for_table(table: str, role: str | None) -> list[str]:
    """The application roles that may do the most on ``table``, other than ``role``: of the
    roles holding a privilege on it that ``role`` lacks, those whose privileges on it no
    other such role exceeds, in the README's order. Whatever privilege ``role`` was refused,
    if any role holds it, one of these does."""
    def on_table(name: str) -> frozenset[str]:
        return PRIVILEGES.get(name, {}).get(table, frozenset())

    mine = on_table(role or "")
    more = [other for other in APP_ROLES if other != role and on_table(other) - mine]
    return [other for other in more
            if not any(on_table(other) < on_table(bigger) for bigger in more)]


def _or_list(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def permission_advice(primary: str, role: str | None) -> str:
    """Which role to connect as instead: the privileges of each role are exact (`ql db
    check` refuses one too many), so a grant is never the answer."""
    found = _DENIED_TABLE.search(primary)
    table = found.group(1) if found else None
    others = roles_for_table(table, role) if table else []
    if others:
        return (f"connect as {_or_list(others)} instead, the role{'s' if len(others) > 1 else ''}"
                f" that may do the most on {table} (each role's privileges are exact, so `ql "
                "db check` refuses a grant; see 'Database roles' in README.md)")
    return (f"connect as the role made for this command: {_ROLE_FOR_COMMAND} (see 'Database "
            "roles' in README.md)")


def _permission_denied(exc: BaseException, action: str,
                       conn: psycopg.Connection[object] | None) -> str:
    """Which object the role may not use (the server names it: "permission denied for table
    t"), which role, and which role to connect as instead: never a password or a URL."""
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) or "permission denied"
    role = None
    if conn is not None and not (conn.closed or conn.broken):
        role = conn.info.user
    who = f"the database role {role!r}" if role else "this database role"
    return (f"{action}: {primary} ({sqlstate(exc) or '42501'}): {who} may not do this; "
            f"{permission_advice(primary, role)}")


def translate_driver_error(exc: BaseException, action: str, conn: object = None) -> QinglongError | None:
    """``translate`` for a psycopg error raised where the caller holds only a generic
    connection (the audit's reader); None for anything that is not a psycopg error."""
    if not isinstance(exc, psycopg.Error):
        return None
    return translate(exc, action, conn if isinstance(conn, psycopg.Connection) else None)


@contextmanager
def translated(action: str, conn: object = None) -> Iterator[None]:
    """A psycopg error raised inside the block as the QinglongError ``translate`` names (a
    backend terminated mid-check is a lost connection, which the caller retries), never a
    traceback."""
    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc, action, conn if isinstance(conn, psycopg.Connection) else None) from exc
