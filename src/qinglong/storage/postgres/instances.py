"""Process heartbeats on PostgreSQL (database clock, one auto-committed statement each)."""

from __future__ import annotations

from typing import LiteralString

import psycopg

from qinglong.storage import records
from qinglong.storage.dbapi import fetch_all
from qinglong.storage.ports import Instance
from qinglong.storage.postgres.connection import QUERIES, Connector, deadline
from qinglong.storage.postgres.errors import translate


class PgInstanceStore:
    def __init__(self, connector: Connector, *, commit_deadline_s: float = 5.0) -> None:
        """``commit_deadline_s`` bounds each write: with synchronous replication a commit
        waits for the standby, and a heartbeat written by the scheduler thread must not hang
        it when the standby is gone."""
        self._connector = connector
        self._commit_deadline_s = commit_deadline_s

    def _write(self, action: str, query: LiteralString, params: dict[str, object]) -> None:
        with self._connector.connection() as conn:
            try:
                with deadline(conn, self._commit_deadline_s):
                    conn.execute(query, params)
            except psycopg.Error as exc:
                raise translate(exc, action, conn) from exc

    def instance_start(self, instance_id: str, role: str, host: str, pid: int) -> None:
        self._write("register this process", QUERIES["instance_start"],
                    {"instance_id": instance_id, "role": role, "host": host, "pid": pid})

    def instance_beat(self, instance_id: str) -> None:
        self._write("record a heartbeat", QUERIES["instance_beat"], {"instance_id": instance_id})

    def instance_stop(self, instance_id: str) -> None:
        self._write("record a clean stop", QUERIES["instance_stop"], {"instance_id": instance_id})

    def instance_list(self) -> list[Instance]:
        with self._connector.connection() as conn:
            try:
                rows = fetch_all(conn, QUERIES["instance_list"])
            except psycopg.Error as exc:
                raise translate(exc, "list instances", conn) from exc
        return [records.instance_from_row(row) for row in rows]
