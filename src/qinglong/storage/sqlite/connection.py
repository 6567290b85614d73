"""SQLite connections: one per thread, WAL, foreign keys, immediate write transactions."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import weakref
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from qinglong.errors import InvalidInput
from qinglong.storage.sqlfile import load_queries
from qinglong.storage.sqlite.errors import translate

QUERIES = load_queries("qinglong.storage.sqlite")
BUSY_TIMEOUT_MS = 5000
FILE_MODE = 0o600  # SQLite gives the file's -wal, -shm and -journal the file's own mode


def sqlite_path_from_url(url: str) -> Path:
    """``sqlite:///relative.db`` or ``sqlite:////absolute.db`` to a filesystem path."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise InvalidInput("database-url", "must start with sqlite:/// or postgresql://")
    if parts.netloc not in ("", "localhost"):
        raise InvalidInput("database-url", "a sqlite URL has no host: use sqlite:///path/to/file.db")
    if parts.query or parts.fragment:
        raise InvalidInput("database-url", "a sqlite URL takes no query or fragment")
    path = unquote(parts.path)
    path = path.removeprefix("/")  # sqlite:///x.db -> x.db ; sqlite:////abs/x.db -> /abs/x.db
    if not path or path.endswith("/"):
        raise InvalidInput("database-url", "must name a database file, e.g. sqlite:///./qinglong.db")
    return Path(path)


def check_single_name(path: Path) -> None:
    """Refuse a database file that has several hard links (see SqliteDatabase)."""
    try:
        links = path.stat().st_nlink
    except FileNotFoundError:
        return  # created by the first connection
    except OSError as exc:
        raise InvalidInput("database-url", f"cannot read {str(path)!r} ({exc.strerror})") from exc
    if links > 1:
        raise InvalidInput(
            "database-url",
            f"{str(path)!r} has {links} hard links; SQLite keeps its write-ahead log beside the "
            "name a file is opened by, so two names for one database can corrupt it: remove the "
            "other links (a symbolic link is fine)")


def create_private(path: Path) -> None:
    """Create ``path`` empty with ``FILE_MODE`` (SQLite reads an empty file as a new
    database) unless something is there already."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    except FileExistsError:
        return  # an existing file (or a link to one) keeps its mode
    except OSError as exc:
        raise InvalidInput("database-url", f"cannot create {str(path)!r} "
                                           f"({exc.strerror or exc})") from None
    with contextlib.suppress(OSError):
        os.fchmod(fd, FILE_MODE)  # exactly this, whatever the umask
    os.close(fd)


class WriterGate:
    """This process's writers of one file take turns here before ``BEGIN IMMEDIATE``.

    SQLite's own wait for its write lock polls with sleeps that grow to 100 ms, so a thread
    that finds the lock taken by another thread of this process (the scheduler behind the
    executor, in ``ql serve``) loses milliseconds after it was freed. Here the gate is handed
    to the next writer when the previous one commits, in the order they arrived, so a writer
    that comes back at once cannot pass one that was already waiting. The lock still guards
    the file against other processes (a `ql` command); a gate not passed within the busy
    timeout is reported as the file being locked, as SQLite would. A thread that holds it
    passes again at once (SQLite then refuses the nested ``BEGIN``, as before).
    """

    def __init__(self, timeout_s: float) -> None:
        self._mutex = threading.Lock()
        self._taken = False
        self._waiting: deque[threading.Event] = deque()  # first come, first handed the gate
        self._holder = threading.local()
        self._timeout_s = timeout_s

    def enter(self) -> None:
        if getattr(self._holder, "held", False):
            return
        with self._mutex:
            if not self._taken:
                self._taken = True
                self._holder.held = True
                return
            turn = threading.Event()
            self._waiting.append(turn)
        if not turn.wait(self._timeout_s):
            with self._mutex:
                handed = turn.is_set()  # handed over just as the wait ended
                if not handed:
                    self._waiting.remove(turn)
            if not handed:
                raise sqlite3.OperationalError("database is locked (another writer of this "
                                               "process held it too long)")
        self._holder.held = True

    def waiters(self) -> int:
        """How many writers wait at the gate now."""
        with self._mutex:
            return len(self._waiting)

    def leave(self) -> None:
        if not getattr(self._holder, "held", False):
            return
        self._holder.held = False
        with self._mutex:
            if self._waiting:
                self._waiting.popleft().set()  # the gate stays taken, by the next writer
            else:
                self._taken = False


def _dict_row(cursor: sqlite3.Cursor, row: tuple[Any, ...]) -> dict[str, Any]:
    return {column[0]: value for column, value in zip(cursor.description, row, strict=True)}


class _ThreadConnection:
    """One thread's connection, kept in that thread's locals: when the thread ends they are
    dropped, and the connection is closed (``weakref.finalize``)."""

    __slots__ = ("__weakref__", "conn")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn


class SqliteDatabase:
    """A database file with one connection per thread.

    Opening a database changes nothing in the file; ``ql db migrate`` switches it to WAL
    (a persistent property of the file). The file is opened by its real path (symbolic
    links resolved), so every way of naming it shares one write-ahead log; a file with more
    than one hard link is refused, because SQLite keeps the log beside the name it was
    opened by and two names would each get their own. A file it creates is readable by its
    owner alone (``FILE_MODE``), and so are the files SQLite keeps beside it; an existing
    file keeps its mode.
    """

    def __init__(self, path: Path, *, create: bool = False) -> None:
        self.path = path
        if path.is_dir():
            raise InvalidInput("database-url", f"{str(path)!r} is a directory, not a database file")
        if not create and not path.exists():
            raise InvalidInput(
                "database-url",
                f"database file {str(path)!r} does not exist; run `ql db migrate` first",
            )
        if create and not path.parent.exists():
            raise InvalidInput("database-url", f"directory {str(path.parent)!r} does not exist")
        self.real_path = path.resolve()
        if create:
            create_private(self.real_path)
        check_single_name(self.real_path)
        self._local = threading.local()
        # every thread's connection, while its thread lives (its own is closed when it ends)
        self._all: weakref.WeakSet[_ThreadConnection] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.gate = WriterGate(BUSY_TIMEOUT_MS / 1000)
        self.connection()  # open now so a bad file fails early

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use. It is closed when the thread ends
        (thread pools retire idle threads, and a connection kept for each thread that ever
        used the file would pile up) or at ``close``."""
        held: _ThreadConnection | None = getattr(self._local, "held", None)
        if held is None:
            try:
                conn = sqlite3.connect(
                    str(self.real_path),
                    isolation_level=None,
                    check_same_thread=False,
                    timeout=BUSY_TIMEOUT_MS / 1000,
                )
                conn.row_factory = _dict_row
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            except sqlite3.DatabaseError as exc:
                raise translate(exc, f"open {str(self.path)!r}") from exc
            held = _ThreadConnection(conn)
            weakref.finalize(held, conn.close)  # the thread's locals went with the thread
            self._local.held = held
            with self._lock:
                self._all.add(held)
        return held.conn

    def begin_immediate(self, conn: sqlite3.Connection) -> None:
        """Pass the gate and open a write transaction on ``conn``; the caller leaves the
        gate when it commits or rolls back (here if BEGIN itself fails)."""
        self.gate.enter()
        try:
            conn.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.gate.leave()
            raise

    @contextmanager
    def write(self, action: str) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction; rolled back on any exception."""
        conn = self.connection()
        try:
            self.begin_immediate(conn)
        except sqlite3.Error as exc:
            raise translate(exc, action) from exc
        try:
            try:
                yield conn
            except BaseException as exc:
                conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise translate(exc, action) from exc
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise translate(exc, action) from exc
        finally:
            self.gate.leave()

    @contextmanager
    def read(self, action: str) -> Iterator[sqlite3.Connection]:
        """A consistent read (one deferred transaction)."""
        conn = self.connection()
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise translate(exc, action) from exc

    def close(self) -> None:
        with self._lock:
            for held in list(self._all):
                held.conn.close()
            self._all.clear()
        self._local = threading.local()

    def open_connections(self) -> int:
        """How many threads hold a connection now (for tests and diagnostics)."""
        with self._lock:
            return len(self._all)
