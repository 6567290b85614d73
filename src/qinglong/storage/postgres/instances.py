"""Process heartbeats on PostgreSQL (database clock, one auto-committed statement each).

An instance id is held by one live process at a time (ports.InstanceStore); the store keeps
the registration it made, and fences its heartbeats and its clean stop by it."""

from __future__ import annotations

from typing import LiteralString

import psycopg

from qinglong.storage import records
from qinglong.storage.dbapi import fetch_all, fetch_one
from qinglong.storage.instances import refusal
from qinglong.storage.ports import INSTANCE_STALE_MS, Instance, Registration
from qinglong.storage.postgres.connection import QUERIES, Connector, deadline
from qinglong.storage.postgres.errors import translate


class PgInstanceStore:
    def __init__(self, connector: Connector, *, commit_deadline_s: float = 5.0) -> None:
        """``commit_deadline_s`` bounds each write: with synchronous replication a commit
        waits for the standby, and a heartbeat written by the scheduler thread must not hang
        it when the standby is gone."""
        self._connector = connector
        self._commit_deadline_s = commit_deadline_s
        self._held: dict[str, Registration] = {}

    def _write(self, action: str, query: LiteralString, params: dict[str, object]) -> int:
        with self._connector.connection() as conn:
            try:
                with deadline(conn, self._commit_deadline_s):
                    return conn.execute(query, params).rowcount
            except psycopg.Error as exc:
                raise translate(exc, action, conn) from exc

    def instance_start(self, instance_id: str, role: str, host: str, pid: int, *,
                       resume: Registration | None = None,
                       locked: bool = False) -> Registration:
        params = {"instance_id": instance_id, "role": role, "host": host, "pid": pid,
                  "stale_ms": INSTANCE_STALE_MS, "locked": locked,
                  "resume_started_at_ms": None if resume is None else resume.started_at_ms}
        with self._connector.connection() as conn:
            try:
                with deadline(conn, self._commit_deadline_s):
                    taken = fetch_one(conn, QUERIES["instance_start"], params)
                    holder = None if taken else fetch_one(conn, QUERIES["instance_holder"],
                                                          {"instance_id": instance_id})
            except psycopg.Error as exc:
                raise translate(exc, "register this process", conn) from exc
        if taken is None:
            now_ms = int(holder["now_ms"]) if holder is not None else 0
            raise refusal(instance_id, holder, now_ms)
        registration = Registration(instance_id=instance_id, host=host, pid=pid,
                                    started_at_ms=int(taken["started_at_ms"]))
        self._held[instance_id] = registration
        return registration

    def _fenced(self, instance_id: str) -> dict[str, object] | None:
        held = self._held.get(instance_id)
        if held is None:
            return None
        return {"instance_id": instance_id, "host": held.host, "pid": held.pid,
                "started_at_ms": held.started_at_ms}

    def instance_beat(self, instance_id: str) -> bool:
        params = self._fenced(instance_id)
        if params is None:
            return False
        return self._write("record a heartbeat", QUERIES["instance_beat"], params) == 1

    def instance_stop(self, instance_id: str) -> None:
        params = self._fenced(instance_id)
        if params is not None:
            self._write("record a clean stop", QUERIES["instance_stop"], params)
            self._held.pop(instance_id, None)

    def instance_list(self) -> list[Instance]:
        with self._connector.connection() as conn:
            try:
                rows = fetch_all(conn, QUERIES["instance_list"])
            except psycopg.Error as exc:
                raise translate(exc, "list instances", conn) from exc
        return [records.instance_from_row(row) for row in rows]

