"""Issue 18, item 4: `ql serve --http` on a port in use stops before it admits or runs
anything (it used to run jobs first, then exit 2, leaving a queued Run behind)."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ql import Ql

pytestmark = pytest.mark.slow


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        yield int(taken.getsockname()[1])


def rows(db: Path, query: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(db) as conn:
        return list(conn.execute(query).fetchall())


def test_a_port_in_use_stops_serve_before_it_admits_or_runs_anything(
        tmp_path: Path, busy_port: int) -> None:
    db = tmp_path / "ql.db"
    ql = Ql(f"sqlite:///{db}", cwd=tmp_path)
    for step in (("db", "migrate"), ("project", "create", "demo"),
                 ("task", "publish", "--project", "demo", "--task", "hello",
                  "--shell", "echo ran > ran.txt"),
                 # due every second: a scheduler that got to run would admit at once
                 ("trigger", "publish", "--project", "demo", "--trigger", "every-second",
                  "--task", "hello", "--cron", "* * * * * *", "--timezone", "UTC"),
                 # queued before the start: an executor that got to run would run it at once
                 ("task", "run", "--project", "demo", "--task", "hello")):
        ql.run(*step)
    [(queued_id,)] = rows(db, "SELECT id FROM runs")

    done = ql.run("serve", "--http", f"127.0.0.1:{busy_port}", "--duration", "5s", check=False)

    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"ql: http: cannot listen on 127.0.0.1:{busy_port} (Address already in use)"]
    # nothing admitted: the Run queued beforehand is still the only one, still queued, and no
    # attempt of it started
    assert rows(db, "SELECT id, status FROM runs") == [(queued_id, "queued")]
    assert rows(db, "SELECT status, started_at_ms FROM run_attempts") in ([], [("claimed", None)])
    assert rows(db, "SELECT count(*) FROM run_events WHERE type LIKE 'attempt.%'") == [(0,)]
    assert not (tmp_path / "ran.txt").exists()
    # and the file is free again: the lock went with the refused server
    again = ql.run("serve", "--duration", "1s", check=False)
    assert again.returncode == 0, again.stderr
