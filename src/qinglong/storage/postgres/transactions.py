"""Explicit transactions with bounded retry: the one retry loop of the PostgreSQL adapter.

Only 40001 (serialization failure), 40P01 (deadlock) and 55P03 (lock timeout) raised before
COMMIT are retried, on a fresh transaction. A COMMIT the server answered with 40001 or
40P01 rolled back for sure and may be retried too (``retry_rejected_commit``); a COMMIT whose
reply never came is never retried: `CommitNotAcknowledged` reaches the caller, whose durable
facts must decide what happened.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Literal, LiteralString, TypeVar

import psycopg

from qinglong.clock import pause
from qinglong.errors import Conflict, OutcomeUnknown, TransientStorageError
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
from qinglong.storage.postgres.errors import is_retryable, sqlstate, translate

T = TypeVar("T")
DEFAULT_ATTEMPTS = 3
RETRYABLE_AT_COMMIT = frozenset({"40001", "40P01"})  # the server rolled back: safe to run again
COMMIT_DEADLINE_S = 10.0
Isolation = Literal["serializable", "read committed"]
_BEGIN: dict[Isolation, LiteralString] = {
    "serializable": "BEGIN ISOLATION LEVEL SERIALIZABLE",
    "read committed": "BEGIN ISOLATION LEVEL READ COMMITTED",
}


def backoff(attempt: int) -> None:
    """A short randomised pause before retrying a conflict."""
    pause(random.uniform(0.005, 0.03) * attempt)  # noqa: S311 - jitter, not security


def db_now_ms(conn: PgConnection) -> int:
    row = conn.execute(QUERIES["now_ms"]).fetchone()
    assert row is not None
    return int(row["now_ms"])


def transact(
    connector: Connector,
    action: str,
    work: Callable[[PgConnection], T],
    *,
    isolation: Isolation = "serializable",
    attempts: int = DEFAULT_ATTEMPTS,
    commit_deadline_s: float = COMMIT_DEADLINE_S,
    retry_rejected_commit: bool = True,
    before_commit: Callable[[], None] | None = None,
    on_retry: Callable[[str], None] | None = None,
) -> tuple[T, CommitReceipt]:
    """Run ``work`` in one transaction and commit it, retrying conflicts as described above.

    Whatever ``work`` raises rolls the transaction back; psycopg errors are translated (our
    own errors and any other exception pass through unchanged). ``on_retry`` hears the
    SQLSTATE of every retried attempt. Raises `CommitRejected` when the server refused the
    COMMIT and it is not retried, and `CommitNotAcknowledged` when its reply was lost.
    """
    for attempt in range(1, attempts + 1):
        with connector.connection() as conn:
            try:
                conn.execute(_BEGIN[isolation])
                result = work(conn)
                if before_commit is not None:
                    before_commit()
            except psycopg.Error as exc:
                rollback_quietly(conn)
                if is_retryable(exc) and attempt < attempts:
                    if on_retry is not None:
                        on_retry(str(sqlstate(exc)))
                    backoff(attempt)
                    continue
                raise translate(exc, action, conn) from exc
            except BaseException:
                rollback_quietly(conn)
                raise
            try:
                receipt = commit(conn, deadline_s=commit_deadline_s)
            except CommitRejected as exc:
                if (retry_rejected_commit and exc.sqlstate in RETRYABLE_AT_COMMIT
                        and attempt < attempts):
                    if on_retry is not None:
                        on_retry(str(exc.sqlstate))
                    backoff(attempt)
                    continue
                raise
            return result, receipt
    raise AssertionError("unreachable: the last attempt either returns or raises")


def serializable(
    connector: Connector,
    action: str,
    work: Callable[[PgConnection], T],
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    isolation: Isolation = "serializable",
) -> T:
    """`transact` for writes whose caller just wants the result: a refused COMMIT becomes
    TransientStorageError (nothing was written, try again) and a lost reply OutcomeUnknown."""
    try:
        result, _ = transact(connector, action, work, attempts=attempts, isolation=isolation)
    except CommitRejected as exc:
        raise TransientStorageError(f"{action}: COMMIT was rejected ({exc.sqlstate}); "
                                    "nothing was written, try again") from exc
    except CommitNotAcknowledged as exc:
        raise OutcomeUnknown(f"{action}: COMMIT was sent but its outcome is unknown") from exc
    return result



def admit_by_key(
    connector: Connector,
    action: str,
    work: Callable[[PgConnection], T],
    *,
    attempts: int,
    commit_deadline_s: float,
    retry_hint: str,
    in_doubt: Callable[[], T],
    rounds: int = 2,
) -> T:
    """Run an admission keyed by an idempotency key (run now, backfill): a plain Conflict
    means a concurrent twin committed the same key first, so one more round looks again; a
    rejected COMMIT wrote nothing; a lost COMMIT reply is settled by ``in_doubt`` (a lookup
    of the key), never by a retry."""
    for round_ in range(1, rounds + 1):
        try:
            result, _ = transact(connector, action, work, attempts=attempts,
                                 commit_deadline_s=commit_deadline_s)
        except Conflict as exc:
            if type(exc) is Conflict and round_ < rounds:
                continue
            raise
        except CommitRejected as exc:
            raise TransientStorageError(
                f"{action}: COMMIT was rejected ({exc.sqlstate}); nothing was written; "
                + retry_hint) from exc
        except CommitNotAcknowledged:
            return in_doubt()
        return result
    raise AssertionError("unreachable: the last round returns or raises")
