"""The writers of one SQLite file in one process take turns at its gate (storage/sqlite).

A second writer thread runs as soon as the first commits or rolls back, instead of polling
SQLite's lock; a writer kept out longer than the busy timeout gets the busy error SQLite
would give; every way out of a transaction opens the gate again.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from qinglong.errors import QinglongError, TransientStorageError
from qinglong.storage.kernel import Database, Tx
from qinglong.storage.sqlite.connection import SqliteDatabase, WriterGate
from qinglong.storage.sqlite.driver import open_sqlite
from qinglong.testing.clock import FakeClock
from tests.support.ql import wait_for


def _file(path: Path, gate_timeout_s: float | None = None) -> SqliteDatabase:
    """A database file with table ``t``; its gate gives up after ``gate_timeout_s``."""
    file = SqliteDatabase(path, create=True)
    if gate_timeout_s is not None:
        file.gate = WriterGate(timeout_s=gate_timeout_s)
    with file.write("schema") as conn:
        conn.execute("CREATE TABLE t (n INTEGER)")
    return file


@pytest.fixture
def database(tmp_path: Path) -> Database:
    return open_sqlite(_file(tmp_path / "gate.db"), FakeClock())


def _insert(n: int) -> Callable[[Tx], int]:
    def work(tx: Tx) -> int:
        tx.sql("INSERT INTO t (n) VALUES (:n)", {"n": n})
        return n
    return work


def _kept_out_while_held(file: SqliteDatabase, write: Callable[[], object]) -> list[QinglongError]:
    """Run ``write`` on another thread while this one holds the gate (SQLite's own lock is
    free all along): the errors it ended with."""
    file.gate.enter()
    failures: list[QinglongError] = []

    def attempt() -> None:
        try:
            write()
        except QinglongError as exc:
            failures.append(exc)

    thread = threading.Thread(target=attempt)
    thread.start()
    thread.join(10)
    file.gate.leave()
    return failures


def _count(db: Database) -> int:
    return int(db.read("count", lambda tx: tx.sql("SELECT count(*) AS c FROM t").fetchone()["c"]))


def test_second_writer_waits_at_the_gate_and_follows_the_commit(database: Database) -> None:
    inside = threading.Event()
    release = threading.Event()
    order: list[str] = []

    def first(tx: Tx) -> None:
        tx.sql("INSERT INTO t (n) VALUES (1)")
        inside.set()
        assert release.wait(10)
        order.append("first commits")

    def second() -> None:
        database.write("second", lambda tx: order.append("second writes")
                       or tx.sql("INSERT INTO t (n) VALUES (2)"))

    one = threading.Thread(target=database.write, args=("first", first))
    one.start()
    assert inside.wait(10)
    two = threading.Thread(target=second)
    two.start()
    two.join(0.2)
    assert two.is_alive(), "the second writer must wait while the first holds the gate"
    release.set()
    one.join(10)
    two.join(10)
    assert not two.is_alive()
    assert order == ["first commits", "second writes"]
    assert _count(database) == 2


def test_a_rolled_back_or_failed_transaction_opens_the_gate(database: Database) -> None:
    def fails(tx: Tx) -> None:
        tx.sql("INSERT INTO t (n) VALUES (1)")
        raise ValueError("boom")

    with pytest.raises(ValueError):
        database.write("fails", fails)

    def bad_sql(tx: Tx) -> None:
        tx.sql("INSERT INTO no_such_table VALUES (1)")

    with pytest.raises(QinglongError):  # translated by the driver
        database.write("bad", bad_sql)
    # another thread gets in at once: nothing was left holding the gate
    done = threading.Event()
    threading.Thread(target=lambda: (database.write("after", _insert(3)), done.set())).start()
    assert done.wait(10)
    assert _count(database) == 1


def test_a_writer_kept_out_past_the_timeout_gets_the_busy_error(tmp_path: Path) -> None:
    file = _file(tmp_path / "busy.db", gate_timeout_s=0.05)
    database = open_sqlite(file, FakeClock())
    entered = threading.Event()
    release = threading.Event()

    def holder(tx: Tx) -> None:
        entered.set()
        assert release.wait(10)

    thread = threading.Thread(target=database.write, args=("hold", holder))
    thread.start()
    assert entered.wait(10)
    try:
        with pytest.raises(TransientStorageError, match="busy"):
            database.write("late", _insert(1))
    finally:
        release.set()
        thread.join(10)
    database.write("now", _insert(2))
    assert _count(database) == 1


def test_the_transaction_writer_waits_at_the_gate_not_only_at_the_lock(tmp_path: Path) -> None:
    file = _file(tmp_path / "driver.db", gate_timeout_s=0.05)
    database = open_sqlite(file, FakeClock())
    failures = _kept_out_while_held(file, lambda: database.write("blocked", _insert(1)))
    assert len(failures) == 1 and isinstance(failures[0], TransientStorageError)
    assert "busy" in str(failures[0])
    database.write("free", _insert(2))
    assert _count(database) == 1


def test_the_gate_is_passed_again_by_its_holder_and_left_once() -> None:
    gate = WriterGate(timeout_s=0.05)
    gate.enter()
    gate.enter()  # its holder passes at once (SQLite refuses a nested BEGIN itself)
    gate.leave()
    gate.leave()  # a second leave is nothing
    other: list[BaseException] = []

    def enter_elsewhere() -> None:
        try:
            gate.enter()
            gate.leave()
        except sqlite3.OperationalError as exc:  # pragma: no cover - the failure shown
            other.append(exc)

    thread = threading.Thread(target=enter_elsewhere)
    thread.start()
    thread.join(10)
    assert other == []


def test_the_file_writer_uses_the_gate_too(tmp_path: Path) -> None:
    file = _file(tmp_path / "file.db", gate_timeout_s=0.05)

    def write() -> None:
        with file.write("blocked") as conn:
            conn.execute("INSERT INTO t VALUES (1)")

    failures = _kept_out_while_held(file, write)
    assert len(failures) == 1 and "busy" in str(failures[0])
    with file.write("free") as conn:
        conn.execute("INSERT INTO t VALUES (2)")
    file.close()


def test_the_gate_is_handed_over_in_the_order_writers_arrived() -> None:
    gate = WriterGate(timeout_s=10)
    order: list[str] = []
    gate.enter()  # the first writer

    def writer(name: str) -> None:
        gate.enter()
        order.append(name)
        gate.leave()

    threads = []
    for count, name in enumerate(("second", "third"), start=1):
        thread = threading.Thread(target=writer, args=(name,))
        thread.start()
        threads.append(thread)
        wait_for(lambda count=count: gate.waiters() == count, 10,  # queued before the next
                 f"{name} waiting at the gate", interval=0.001)
    gate.leave()
    # the first writer comes back at once: it queues behind the two that were waiting
    gate.enter()
    order.append("first again")
    gate.leave()
    for thread in threads:
        thread.join(10)
    assert order == ["second", "third", "first again"]


def test_a_writer_that_gave_up_leaves_the_queue() -> None:
    gate = WriterGate(timeout_s=0.05)
    gate.enter()
    failures: list[BaseException] = []

    def late() -> None:
        try:
            gate.enter()
        except sqlite3.OperationalError as exc:
            failures.append(exc)

    thread = threading.Thread(target=late)
    thread.start()
    thread.join(10)
    assert len(failures) == 1 and gate.waiters() == 0
    gate.leave()
    gate.enter()  # free again: passed at once
    gate.leave()

