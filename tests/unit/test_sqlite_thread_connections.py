"""Each thread has its own SQLite connection (storage/sqlite/connection.py), closed when the
thread ends: thread pools (the API's, the executor's) retire idle threads and start new
ones, and a connection kept for every thread that ever used the file piled up, one open
file set each."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from qinglong.storage.sqlite.connection import SqliteDatabase
from tests.support.ql import wait_for


def open_files(under: Path) -> int:
    """Descriptors of this process open on files under ``under``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(str(under))
    return count


def test_a_thread_that_ends_closes_its_connection(tmp_path: Path) -> None:
    file = SqliteDatabase(tmp_path / "threads.db", create=True)
    with file.write("schema") as conn:
        conn.execute("CREATE TABLE t (n INTEGER)")
    alone = open_files(tmp_path)  # the opening thread's own connection

    def use(n: int) -> None:
        with file.write("insert") as conn:
            conn.execute("INSERT INTO t VALUES (?)", (n,))

    for n in range(20):  # one thread after another, as a pool retiring idle threads does
        thread = threading.Thread(target=use, args=(n,))
        thread.start()
        thread.join()
    wait_for(lambda: file.open_connections() == 1, 10, "the ended threads' connections closed")
    assert open_files(tmp_path) == alone
    with file.read("count") as conn:
        assert conn.execute("SELECT count(*) AS n FROM t").fetchone()["n"] == 20
    file.close()
    assert open_files(tmp_path) == 0
