"""Streaming physical replication between throw-away PostgreSQL servers, for fault tests.

A `Standby` is an `EmbeddedPostgres` whose data directory comes from ``pg_basebackup`` of a
running primary instead of ``initdb``: it has its own directory and port, streams from the
primary (``primary_conninfo``, ``hot_standby = on``, a physical replication slot so the
primary keeps the WAL it has not received), and is stopped, started, crashed and cleaned up
like any other server. Typical use::

    primary = EmbeddedPostgres(base_dir=work / "primary").start()
    standby = Standby(primary, base_dir=work / "standby").start()
    set_synchronous(primary)              # waits until pg_stat_replication says 'sync'
    standby.stop()                        # commits on the primary now wait
    standby.start()                       # ... and finish
    standby.wait_replayed()               # the standby has replayed the primary's WAL
    primary.crash(); standby.promote()    # the standby accepts writes

Every wait here is bounded and raises `ReplicationTimeout` when its time runs out.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from testkit.postgres import EmbeddedPostgres

SYNC_COMMIT_LEVELS = ("on", "remote_apply", "remote_write")
SYNC_STATES = ("sync", "async", "potential", "quorum")
_NAME = re.compile(r"[a-z][a-z0-9_]{0,62}")


class ReplicationTimeout(RuntimeError):
    """A bounded replication wait ran out of time."""


@dataclass(frozen=True)
class WalSender:
    """One row of the primary's ``pg_stat_replication``."""

    application_name: str
    state: str
    sync_state: str
    replay_lsn: str | None


class Standby(EmbeddedPostgres):
    """A streaming hot standby of ``primary``, created by ``pg_basebackup`` at first start.

    ``name`` is both its ``application_name`` (as seen in ``pg_stat_replication`` and usable
    in ``synchronous_standby_names``) and the name of its replication slot on the primary.
    ``primary_host`` is the address the standby connects to (127.0.0.1, or an address added
    with `EmbeddedPostgres.allow_addresses`).
    """

    def __init__(self, primary: EmbeddedPostgres, name: str | None = None, *,
                 base_dir: Path | None = None, port: int = 0, primary_host: str = "127.0.0.1",
                 slot: bool = True, settings: dict[str, str] | None = None) -> None:
        super().__init__(base_dir=base_dir, port=port, fsync=primary.fsync,
                         settings=dict(settings or {}))
        self.primary = primary
        self.name = name or f"standby_{self.port}"
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"standby name {self.name!r}: use lower-case letters, digits and _")
        self.primary_host = primary_host
        self.slot = slot
        self.promoted = False
        self.basebackup_seconds: float | None = None
        self.promote_seconds: float | None = None

    def __repr__(self) -> str:
        return f"Standby({self.name!r}, port={self.port}, primary port={self.primary.port})"

    def primary_conninfo(self) -> str:
        return (f"host={self.primary_host} port={self.primary.port} user=postgres "
                f"application_name={self.name} connect_timeout=5")

    def initdb(self) -> None:
        """Clone the running primary (``pg_basebackup -R -X stream -c fast``) and configure
        the copy as a standby of it."""
        self._prepare_data_dir()
        command = ["pg_basebackup", "-d", self.primary_conninfo(), "-D", str(self.data_dir),
                   "-R", "-X", "stream", "-c", "fast"]
        if not self.fsync:
            command.append("--no-sync")
        if self.slot:
            command += ["-C", "-S", self.name]
        started = time.monotonic()
        done = self.run_tool(*command, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"pg_basebackup of the primary on port {self.primary.port} "
                               f"failed: {done.stderr.strip()[-800:]}")
        self.basebackup_seconds = time.monotonic() - started
        # The copy carries the primary's postgresql.auto.conf; the lines below override it.
        # synchronous_standby_names is cleared so that, once promoted, this server does not
        # wait for standbys of its own.
        self.append_config([
            "# standby settings (testkit.replication)",
            self._listen_line(),
            f"unix_socket_directories = '{self.data_dir}'",
            "hot_standby = on",
            "hot_standby_feedback = on",
            "wal_receiver_status_interval = 1s",
            "synchronous_standby_names = ''",
            f"primary_conninfo = '{self.primary_conninfo()}'",
            *([f"primary_slot_name = '{self.name}'"] if self.slot else []),
            *(f"{key} = {value}" for key, value in self.settings.items()),
        ])

    def start(self) -> Standby:
        super().start()
        self.wait_ready()
        return self

    def replay_lsn(self) -> str | None:
        """``pg_last_wal_replay_lsn()``: the end of the last WAL record replayed (None once
        promoted with nothing replayed)."""
        value = self.scalar("SELECT pg_last_wal_replay_lsn()::text")
        return None if value is None else str(value)

    def wait_replayed(self, lsn: str | None = None, timeout: float = 30.0) -> float:
        """Wait until this standby has replayed up to ``lsn`` (default: the primary's current
        WAL LSN, read now). Returns the seconds waited."""
        target = lsn if lsn is not None else self.primary.current_wal_lsn()
        started = time.monotonic()
        deadline = started + timeout
        last: Any = None
        while True:
            with contextlib.suppress(psycopg.OperationalError):
                last, done = self.query(
                    "SELECT pg_last_wal_replay_lsn()::text, "
                    "coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)", [target])[0]
                if done:
                    return time.monotonic() - started
            if time.monotonic() >= deadline:
                raise ReplicationTimeout(f"{self!r} replayed up to {last}, not {target}, "
                                         f"within {timeout} s")
            time.sleep(0.02)

    def promote(self, timeout: float = 30.0) -> float:
        """Promote this standby (``pg_ctl promote``) and wait until it accepts writes: out of
        recovery and able to assign a transaction id. Returns the seconds it took."""
        started = time.monotonic()
        done = self.run_tool("pg_ctl", "-D", str(self.data_dir), "-w", "-t",
                             str(max(1, int(timeout))), "promote", check=False,
                             timeout=timeout + 10)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl promote of {self!r} failed: {done.stderr.strip()}")
        deadline = started + timeout
        problem = "no answer"
        while True:
            try:
                with self.connect() as conn:
                    conn.execute("SELECT pg_current_xact_id()")  # fails while read-only
                    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                    if row is not None and row[0] is False:
                        break
                    problem = "still in recovery"
            except psycopg.Error as error:
                problem = str(error).strip()
            if time.monotonic() >= deadline:
                raise ReplicationTimeout(f"{self!r} did not accept writes within {timeout} s "
                                         f"after promotion: {problem}")
            time.sleep(0.02)
        self.promoted = True
        self.promote_seconds = time.monotonic() - started
        return self.promote_seconds

    def drop_slot(self) -> None:
        """Drop this standby's replication slot on the primary, if the primary answers."""
        if not self.slot:
            return
        with contextlib.suppress(psycopg.Error, RuntimeError):
            self.primary.query("SELECT pg_drop_replication_slot(slot_name) FROM "
                               "pg_replication_slots WHERE slot_name = %s AND NOT active",
                               [self.name])


# -- the primary's side --------------------------------------------------------------------


def replication_status(primary: EmbeddedPostgres) -> list[WalSender]:
    """The primary's ``pg_stat_replication`` rows, by application name."""
    rows = primary.query("SELECT application_name, state, sync_state, replay_lsn::text "
                         "FROM pg_stat_replication ORDER BY application_name")
    return [WalSender(str(name), str(state), str(sync), None if lsn is None else str(lsn))
            for name, state, sync, lsn in rows]


def wait_sync_state(primary: EmbeddedPostgres, wanted: str, *, standby: str | None = None,
                    timeout: float = 30.0) -> list[WalSender]:
    """Wait until ``pg_stat_replication`` shows a streaming standby (the one named ``standby``,
    or any) with ``sync_state = wanted``; for 'async', until every streaming standby (at least
    one) is async. Returns the rows seen."""
    if wanted not in SYNC_STATES:
        raise ValueError(f"sync_state {wanted!r}: one of {SYNC_STATES}")
    deadline = time.monotonic() + timeout
    while True:
        rows = [row for row in replication_status(primary)
                if row.state == "streaming" and (standby is None or row.application_name == standby)]
        states = {row.sync_state for row in rows}
        if rows and ((wanted == "async" and states == {"async"})
                     or (wanted != "async" and wanted in states)):
            return rows
        if time.monotonic() >= deadline:
            raise ReplicationTimeout(
                f"pg_stat_replication on port {primary.port} did not show "
                f"{standby or 'a standby'} as {wanted!r} within {timeout} s: "
                f"{replication_status(primary)}")
        time.sleep(0.02)


def _alter_system(primary: EmbeddedPostgres, settings: dict[str, str]) -> None:
    with primary.connect() as conn:
        for name, value in settings.items():
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name),
                                                                   sql.Literal(value)))


def set_synchronous(primary: EmbeddedPostgres, *, commit: str = "on", standby_names: str = "*",
                    wait: bool = True, timeout: float = 30.0) -> list[WalSender]:
    """Make commits on ``primary`` wait for a standby: ``synchronous_standby_names`` (default
    '*', i.e. the first connected standby) and ``synchronous_commit`` ('on' waits for the
    standby's flush, 'remote_apply' for its replay, 'remote_write' for its write), then
    reload. With ``wait``, returns once ``pg_stat_replication`` shows a 'sync' standby.

    The reload reaches sessions at their next statement; ``synchronous_commit`` set by
    ALTER SYSTEM applies to sessions that do not override it.
    """
    if commit not in SYNC_COMMIT_LEVELS:
        raise ValueError(f"synchronous_commit {commit!r}: one of {SYNC_COMMIT_LEVELS}")
    _alter_system(primary, {"synchronous_standby_names": standby_names,
                            "synchronous_commit": commit})
    primary.reload(timeout)
    return wait_sync_state(primary, "sync", timeout=timeout) if wait else []


def set_asynchronous(primary: EmbeddedPostgres, *, wait: bool = True,
                     timeout: float = 30.0) -> list[WalSender]:
    """Stop waiting for standbys (``synchronous_standby_names = ''``, ``synchronous_commit =
    on`` which is then local only) and reload; commits already waiting are released. With
    ``wait``, returns once every streaming standby (at least one) shows 'async'."""
    _alter_system(primary, {"synchronous_standby_names": "", "synchronous_commit": "on"})
    primary.reload(timeout)
    return wait_sync_state(primary, "async", timeout=timeout) if wait else []
