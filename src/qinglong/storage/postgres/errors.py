"""Translate psycopg failures into the qinglong error hierarchy (one place).

Whether a connection is lost is judged from the connection's state, not from the
exception class: 25P03 (idle-in-transaction timeout), 25P04 (transaction timeout),
57P01 (terminated) and a closed socket all arrive as different classes.
"""

from __future__ import annotations

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


def _permission_denied(exc: BaseException, action: str,
                       conn: psycopg.Connection[object] | None) -> str:
    """Which object the role may not use (the server names it: "permission denied for table
    t"), and which role: never a password or a URL."""
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None) or "permission denied"
    role = None
    if conn is not None and not (conn.closed or conn.broken):
        role = conn.info.user
    who = f"the database role {role!r}" if role else "this database role"
    return (f"{action}: {primary} ({sqlstate(exc) or '42501'}): {who} lacks the privilege; "
            "grant it or use a role that has it")


def translate_driver_error(exc: BaseException, action: str, conn: object = None) -> QinglongError | None:
    """``translate`` for a psycopg error raised where the caller holds only a generic
    connection (the audit's reader); None for anything that is not a psycopg error."""
    if not isinstance(exc, psycopg.Error):
        return None
    return translate(exc, action, conn if isinstance(conn, psycopg.Connection) else None)
