"""Process heartbeats on SQLite (node clock)."""

from __future__ import annotations

from qinglong.clock import Clock
from qinglong.storage import records
from qinglong.storage.dbapi import fetch_all
from qinglong.storage.ports import Instance
from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase


class SqliteInstanceStore:
    def __init__(self, db: SqliteDatabase, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def instance_start(self, instance_id: str, role: str, host: str, pid: int) -> None:
        with self._db.write("register this process") as conn:
            conn.execute(QUERIES["instance_start"], {"instance_id": instance_id, "role": role,
                                                     "host": host, "pid": pid,
                                                     "now_ms": self._clock.now_ms()})

    def instance_beat(self, instance_id: str) -> None:
        with self._db.write("record a heartbeat") as conn:
            conn.execute(QUERIES["instance_beat"],
                         {"instance_id": instance_id, "now_ms": self._clock.now_ms()})

    def instance_stop(self, instance_id: str) -> None:
        with self._db.write("record a clean stop") as conn:
            conn.execute(QUERIES["instance_stop"],
                         {"instance_id": instance_id, "now_ms": self._clock.now_ms()})

    def instance_list(self) -> list[Instance]:
        with self._db.read("list instances") as conn:
            return [records.instance_from_row(row)
                    for row in fetch_all(conn, QUERIES["instance_list"])]
