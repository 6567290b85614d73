"""SERIALIZABLE transactions with bounded retry: only 40001, 40P01 and 55P03 are retried.
A COMMIT the server answered with 40001 or 40P01 rolled back for sure and is retried too; a
COMMIT whose reply is lost is never retried (its outcome is unknown)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TypeVar

import psycopg

from qinglong.clock import pause
from qinglong.errors import OutcomeUnknown, QinglongError, TransientStorageError
from qinglong.storage.postgres.connection import (
    QUERIES,
    CommitNotAcknowledged,
    CommitReceipt,
    CommitRejected,
    Connector,
    PgConnection,
    commit,
    rollback_quietly,
)
from qinglong.storage.postgres.errors import is_retryable, translate

T = TypeVar("T")
DEFAULT_ATTEMPTS = 3
RETRYABLE_AT_COMMIT = frozenset({"40001", "40P01"})  # the server rolled back: safe to run again
COMMIT_DEADLINE_S = 10.0


def backoff(attempt: int) -> None:
    """A short randomised pause before retrying a serialization failure."""
    pause(random.uniform(0.005, 0.03) * attempt)  # noqa: S311 - jitter, not security


def db_now_ms(conn: PgConnection) -> int:
    row = conn.execute(QUERIES["now_ms"]).fetchone()
    assert row is not None
    return int(row["now_ms"])


def serializable(
    connector: Connector,
    action: str,
    work: Callable[[PgConnection], T],
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    commit_deadline_s: float = COMMIT_DEADLINE_S,
) -> tuple[T, CommitReceipt]:
    """Run ``work`` in a SERIALIZABLE transaction and commit it, retrying conflicts."""
    for attempt in range(1, attempts + 1):
        with connector.connection() as conn:
            try:
                conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
                result = work(conn)
            except QinglongError:
                rollback_quietly(conn)
                raise
            except psycopg.Error as exc:
                rollback_quietly(conn)
                if is_retryable(exc) and attempt < attempts:
                    backoff(attempt)
                    continue
                raise translate(exc, action, conn) from exc
            try:
                receipt = commit(conn, deadline_s=commit_deadline_s)
            except CommitRejected as exc:
                if exc.sqlstate in RETRYABLE_AT_COMMIT and attempt < attempts:
                    backoff(attempt)
                    continue
                raise TransientStorageError(f"{action}: COMMIT was rejected ({exc.sqlstate}); "
                                            "nothing was written, try again") from exc
            except CommitNotAcknowledged as exc:
                raise OutcomeUnknown(f"{action}: COMMIT was sent but its outcome is unknown") from exc
            return result, receipt
    raise AssertionError("unreachable: the last attempt either returns or raises")
