"""The storage kernel: one ``Database`` over a dialect's driver, and the ``Tx`` every store
works in.

A store is written once, over ``Database``: it asks for a read or a write transaction,
runs its queries by name in the ``Tx`` it is given (each dialect's ``.sql`` files hold the
same names) and reads the time with ``Tx.now_ms`` (the node clock on SQLite, the database
clock on PostgreSQL). What really differs between the databases lives in the ``Driver``:
how a connection is lent, how a transaction begins and commits, which failures are
conflicts worth retrying, and how a driver error becomes one of ours. The difference the
core must know is a named flag of ``Capabilities``, never a probe of which queries exist.

Transactions:

- ``read``: one consistent read (SQLite: a deferred transaction; PostgreSQL: autocommit
  statements, or one REPEATABLE READ READ ONLY snapshot when asked for).
- ``write``: one write transaction (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: SERIALIZABLE
  or READ COMMITTED), run again after a conflict the driver calls retryable, up to
  ``attempts`` times and only before COMMIT was sent. A COMMIT the server refused wrote
  nothing (``TransientStorageError``); a COMMIT whose reply was lost is ``OutcomeUnknown``.
- ``transact``: ``write`` for callers that settle those two cases themselves (admission):
  it returns the commit's receipt and raises ``CommitRejected`` / ``CommitNotAcknowledged``.
- ``transaction``: a unit of work. Every store call the same thread makes inside it joins
  its one transaction (nothing is retried inside: a conflict fails the whole unit), so
  several stores commit together or not at all.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Literal, LiteralString, Protocol, TypeVar

from qinglong.clock import pause
from qinglong.domain.task import ExecutorType
from qinglong.errors import OutcomeUnknown, QinglongError, StorageError, TransientStorageError
from qinglong.storage.dbapi import Connection, Cursor, Params, Queries, Row

T = TypeVar("T")
Isolation = Literal["serializable", "read committed"]
DEFAULT_ATTEMPTS = 3
COMMIT_DEADLINE_S = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Capabilities:
    """What the core may count on from a database, by name.

    ``name`` is for messages and metric labels only; code that must behave differently asks
    for the capability that makes the difference.
    """

    name: str  # "sqlite" | "postgresql"
    database_clock: bool  # times come from the database (else from the node's Clock)
    shared: bool  # several processes serve it at once: claims are fenced row leases
    set_based_writes: bool  # one statement writes a batch into several tables (admissions, steps)
    listen: bool  # commits can wake other processes (LISTEN/NOTIFY)
    roles: bool  # least-privilege roles, checked by readiness
    logs_in_database: bool  # command output is shipped into the database (else log files)
    executor_type: ExecutorType  # who runs what this database admits


@dataclass(frozen=True, slots=True)
class CommitReceipt:
    durable: bool  # False when the server warned that the commit may not be replicated
    warnings: tuple[str, ...] = ()


DURABLE = CommitReceipt(durable=True)


@dataclass(frozen=True, slots=True)
class Wake:
    """A hint sent on commit: ``topic`` changed (the payload names what, or is empty)."""

    topic: str
    payload: str = ""


class CommitNotAcknowledged(StorageError):
    """COMMIT was sent and no success reply arrived: the outcome is unknown."""

    code = "QL_OUTCOME_UNKNOWN"


class CommitRejected(StorageError):
    """The server answered COMMIT with an error: the transaction rolled back."""

    code = "QL_COMMIT_REJECTED"

    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class Driver(Protocol):
    """The dialect's side of the kernel: connections, transactions and its errors."""

    @property
    def capabilities(self) -> Capabilities: ...
    @property
    def queries(self) -> Queries: ...
    @property
    def error(self) -> type[BaseException]:
        """The driver's base exception (sqlite3.Error, psycopg.Error)."""
        ...

    def connection(self) -> AbstractContextManager[Connection]: ...
    def begin(self, conn: Connection, *, write: bool, isolation: Isolation,
              snapshot: bool) -> bool:
        """Open a transaction on ``conn``; False when the read runs without one."""
        ...
    def announce(self, conn: Connection, wakes: Sequence[Wake]) -> None:
        """Send ``wakes`` to the other processes inside the transaction, if the driver can
        (they are delivered only if it commits)."""
        ...
    def commit(self, conn: Connection, *, deadline_s: float) -> CommitReceipt: ...
    def bounded(self, conn: Connection, seconds: float) -> AbstractContextManager[None]:
        """Cut the connection if the block outlives ``seconds`` (a wait the server cannot
        bound, such as synchronous replication); a no-op where nothing can hang."""
        ...
    def rollback(self, conn: Connection) -> None: ...
    def array(self, values: Sequence[object]) -> object: ...
    def now_ms(self, conn: Connection) -> int: ...
    def retryable(self, exc: BaseException) -> str | None:
        """The code of a conflict that is safe to run again (else None)."""
        ...
    def error_code(self, exc: BaseException) -> str | None:
        """The database's own code for a failure its driver raised (PostgreSQL: the SQLSTATE;
        SQLite: the extended result code's name), for metrics and messages; else None."""
        ...
    def translate(self, exc: BaseException, action: str, conn: Connection) -> QinglongError: ...
    def after_commit(self, wakes: Sequence[Wake]) -> None:
        """Tell this process what a commit changed."""
        ...
    def close(self) -> None: ...


@dataclass(slots=True, eq=False)
class Tx:
    """One transaction: queries by name, the store's clock, and wake-ups sent on commit."""

    raw: Connection
    queries: Queries
    _driver: Driver
    wakes: list[Wake] = field(default_factory=list)

    def execute(self, name: str, params: Params | None = None) -> Cursor:
        return self.raw.execute(self.queries[name], params or {})

    def execute_many(self, name: str, rows: Sequence[Params]) -> None:
        """One statement run once per row of ``rows`` (none: nothing is sent)."""
        if rows:
            self.raw.cursor().executemany(self.queries[name], rows)

    def sql(self, text: LiteralString, params: Params | None = None) -> Cursor:
        """A statement that is not a named query (schema probes, test hooks)."""
        return self.raw.execute(text, params or {})

    def one(self, name: str, params: Params | None = None) -> Row | None:
        row: Row | None = self.execute(name, params).fetchone()
        return row

    def all(self, name: str, params: Params | None = None) -> list[Row]:
        return list(self.execute(name, params).fetchall())

    @property
    def capabilities(self) -> Capabilities:
        return self._driver.capabilities

    def array(self, values: Sequence[object]) -> object:
        """``values`` as one statement argument: a native array where the dialect has them,
        else JSON text (which its statements unpack with json_each)."""
        return self._driver.array(values)

    def now_ms(self) -> int:
        """One reading of the clock this database stamps rows with."""
        return self._driver.now_ms(self.raw)

    def clock_args(self) -> dict[str, int]:
        """The clock as a statement's arguments: a node-clock dialect's statements take the
        time as ``now_ms``; a database-clock dialect's statements read it themselves."""
        if self._driver.capabilities.database_clock:
            return {}
        return {"now_ms": self._driver.now_ms(self.raw)}

    def wake(self, topic: str, payload: str = "") -> None:
        """Tell every process serving this database, once this transaction commits, that
        ``topic`` changed (a hint: see storage/wakeups.py)."""
        wake = Wake(topic, payload)
        if wake not in self.wakes:
            self.wakes.append(wake)


class Database:
    """A database as every store sees it; see the module docstring."""

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._local = threading.local()
        self.capabilities = driver.capabilities
        self.queries = driver.queries

    @property
    def driver(self) -> Driver:
        return self._driver

    def _current(self) -> Tx | None:
        tx: Tx | None = getattr(self._local, "tx", None)
        return tx

    def _joined(self, action: str, tx: Tx, work: Callable[[Tx], T]) -> T:
        """``work`` inside the unit of work ``tx``: a database error is named by this store
        call (``action``), as outside a unit; the unit rolls back (and may run again)."""
        try:
            return work(tx)
        except self._driver.error as exc:
            raise self._driver.translate(exc, action, tx.raw) from exc

    # -- reads ------------------------------------------------------------------------

    def read(self, action: str, work: Callable[[Tx], T], *, snapshot: bool = False,
             deadline_s: float | None = None) -> T:
        """One consistent read (see the module docstring). PostgreSQL runs a read that is
        not a snapshot as autocommit statements: a statement that writes (a claim) commits
        by itself, under ``deadline_s`` when given."""
        current = self._current()
        if current is not None:
            return self._joined(action, current, work)
        driver = self._driver
        with driver.connection() as conn:
            try:
                began = driver.begin(conn, write=False, isolation="serializable",
                                     snapshot=snapshot)
                try:
                    if deadline_s is None:
                        result = work(Tx(conn, self.queries, driver))
                    else:
                        with driver.bounded(conn, deadline_s):
                            result = work(Tx(conn, self.queries, driver))
                except BaseException:
                    if began:
                        driver.rollback(conn)
                    raise
                if began:
                    driver.commit(conn, deadline_s=COMMIT_DEADLINE_S)
                return result
            except driver.error as exc:
                raise driver.translate(exc, action, conn) from exc

    # -- writes -----------------------------------------------------------------------

    def write(self, action: str, work: Callable[[Tx], T], *,
              isolation: Isolation = "serializable", attempts: int = DEFAULT_ATTEMPTS,
              commit_deadline_s: float = COMMIT_DEADLINE_S) -> T:
        """One write transaction, retried after conflicts; see the module docstring."""
        current = self._current()
        if current is not None:
            return self._joined(action, current, work)
        try:
            result, _ = self.transact(action, work, isolation=isolation, attempts=attempts,
                                      commit_deadline_s=commit_deadline_s)
        except CommitRejected as exc:
            raise TransientStorageError(f"{action}: COMMIT was rejected ({exc.sqlstate}); "
                                        "nothing was written, try again") from exc
        except CommitNotAcknowledged as exc:
            raise OutcomeUnknown(f"{action}: COMMIT was sent but its outcome is unknown") from exc
        return result

    def transact(
        self,
        action: str,
        work: Callable[[Tx], T],
        *,
        isolation: Isolation = "serializable",
        attempts: int = DEFAULT_ATTEMPTS,
        commit_deadline_s: float = COMMIT_DEADLINE_S,
        retry_rejected_commit: bool = True,
        before_commit: Callable[[], None] | None = None,
        on_retry: Callable[[str], None] | None = None,
    ) -> tuple[T, CommitReceipt]:
        """Run ``work`` in one write transaction and commit it; conflicts before COMMIT (and,
        with ``retry_rejected_commit``, a COMMIT the server refused) run it again on a fresh
        transaction. ``on_retry`` hears the code of every conflict retried. Raises
        ``CommitRejected`` when a refused COMMIT is not run again, ``CommitNotAcknowledged``
        when its reply was lost: never retried."""
        if self._current() is not None:
            raise StorageError(f"{action}: cannot commit on its own inside a unit of work")
        driver = self._driver
        for attempt in range(1, attempts + 1):
            with driver.connection() as conn:
                tx = Tx(conn, self.queries, driver)
                try:
                    driver.begin(conn, write=True, isolation=isolation, snapshot=False)
                    result = work(tx)
                    if tx.wakes:
                        driver.announce(conn, tx.wakes)
                    if before_commit is not None:
                        before_commit()
                except driver.error as exc:
                    driver.rollback(conn)
                    code = driver.retryable(exc)
                    if code is not None and attempt < attempts:
                        if on_retry is not None:
                            on_retry(code)
                        backoff(attempt)
                        continue
                    raise driver.translate(exc, action, conn) from exc
                except BaseException:
                    driver.rollback(conn)
                    raise
                try:
                    receipt = driver.commit(conn, deadline_s=commit_deadline_s)
                except driver.error as exc:
                    raise driver.translate(exc, action, conn) from exc
                except CommitRejected as exc:
                    if (retry_rejected_commit and exc.sqlstate in RETRYABLE_AT_COMMIT
                            and attempt < attempts):
                        if on_retry is not None:
                            on_retry(str(exc.sqlstate))
                        backoff(attempt)
                        continue
                    raise
            driver.after_commit(tx.wakes)
            return result, receipt
        raise AssertionError("unreachable: the last attempt either returns or raises")

    @contextmanager
    def transaction(self, action: str, *,
                    isolation: Isolation = "serializable") -> Iterator[Tx]:
        """A unit of work: one write transaction that every store call of this thread joins
        until the block ends (committed when it ends normally, rolled back otherwise)."""
        if self._current() is not None:
            raise StorageError(f"{action}: units of work do not nest")
        driver = self._driver
        with driver.connection() as conn:
            tx = Tx(conn, self.queries, driver)
            try:
                driver.begin(conn, write=True, isolation=isolation, snapshot=False)
            except driver.error as exc:
                raise driver.translate(exc, action, conn) from exc
            self._local.tx = tx
            try:
                yield tx
                if tx.wakes:
                    driver.announce(conn, tx.wakes)
            except BaseException as exc:
                self._local.tx = None
                driver.rollback(conn)
                if isinstance(exc, driver.error):
                    raise driver.translate(exc, action, conn) from exc
                raise
            self._local.tx = None
            try:
                driver.commit(conn, deadline_s=COMMIT_DEADLINE_S)
            except driver.error as exc:
                raise driver.translate(exc, action, conn) from exc
            except CommitRejected as exc:
                raise TransientStorageError(f"{action}: COMMIT was rejected ({exc.sqlstate}); "
                                            "nothing was written, try again") from exc
            except CommitNotAcknowledged as exc:
                raise OutcomeUnknown(f"{action}: COMMIT was sent but its outcome is "
                                     "unknown") from exc
        driver.after_commit(tx.wakes)

    def error_code(self, exc: BaseException | None) -> str | None:
        """The database's own code for a failure (see ``Driver.error_code``): ``exc`` or the
        driver error it was translated from; None when neither carries one."""
        for candidate in (exc, None if exc is None else exc.__cause__):
            if isinstance(candidate, CommitRejected):
                return candidate.sqlstate
            if isinstance(candidate, self._driver.error):
                return self._driver.error_code(candidate)
        return None

    @property
    def in_unit(self) -> bool:
        """Whether this thread is inside a unit of work (its store calls join it)."""
        return self._current() is not None

    def unit(self, action: str, work: Callable[[], T], *,
             isolation: Isolation = "serializable", attempts: int = DEFAULT_ATTEMPTS) -> T:
        """Run ``work`` as one unit of work (``transaction``): every store call it makes
        commits together, or none does. A conflict (or a COMMIT the server refused) runs
        the whole unit again, up to ``attempts`` times; a lost COMMIT reply is
        OutcomeUnknown, never retried."""
        for attempt in range(1, attempts + 1):
            try:
                with self.transaction(action, isolation=isolation):
                    return work()
            except TransientStorageError as exc:
                if attempt >= attempts or isinstance(exc, OutcomeUnknown):
                    raise
                backoff(attempt)
        raise AssertionError("unreachable: the last attempt either returns or raises")

    def now_ms(self) -> int:
        """One reading of this database's clock, outside any transaction."""
        return self.read("read the clock", lambda tx: tx.now_ms())

    def close(self) -> None:
        self._driver.close()


RETRYABLE_AT_COMMIT = frozenset({"40001", "40P01"})  # the server rolled back: safe to run again


def backoff(attempt: int) -> None:
    """A short randomised pause before retrying a conflict."""
    pause(random.uniform(0.005, 0.03) * attempt)  # noqa: S311 - jitter, not security
