"""Process heartbeats on SQLite (node clock).

An instance id is held by one live process at a time (ports.InstanceStore); the store keeps
the registration it made, and fences its heartbeats and its clean stop by it."""

from __future__ import annotations

from qinglong.clock import Clock
from qinglong.storage import records
from qinglong.storage.dbapi import fetch_all, fetch_one
from qinglong.storage.instances import refusal
from qinglong.storage.ports import INSTANCE_STALE_MS, Instance, Registration
from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase


class SqliteInstanceStore:
    def __init__(self, db: SqliteDatabase, clock: Clock) -> None:
        self._db = db
        self._clock = clock
        self._held: dict[str, Registration] = {}

    def instance_start(self, instance_id: str, role: str, host: str, pid: int, *,
                       resume: Registration | None = None,
                       locked: bool = False) -> Registration:
        now_ms = self._clock.now_ms()
        with self._db.write("register this process") as conn:
            taken = fetch_one(conn, QUERIES["instance_start"], {
                "instance_id": instance_id, "role": role, "host": host, "pid": pid,
                "now_ms": now_ms, "stale_ms": INSTANCE_STALE_MS, "locked": int(locked),
                "resume_started_at_ms": None if resume is None else resume.started_at_ms})
            holder = None if taken else fetch_one(conn, QUERIES["instance_holder"],
                                                  {"instance_id": instance_id})
        if taken is None:
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
                "started_at_ms": held.started_at_ms, "now_ms": self._clock.now_ms()}

    def instance_beat(self, instance_id: str) -> bool:
        params = self._fenced(instance_id)
        if params is None:
            return False
        with self._db.write("record a heartbeat") as conn:
            return conn.execute(QUERIES["instance_beat"], params).rowcount == 1

    def instance_stop(self, instance_id: str) -> None:
        params = self._fenced(instance_id)
        if params is None:
            return
        with self._db.write("record a clean stop") as conn:
            conn.execute(QUERIES["instance_stop"], params)
        self._held.pop(instance_id, None)

    def instance_list(self) -> list[Instance]:
        with self._db.read("list instances") as conn:
            return [records.instance_from_row(row)
                    for row in fetch_all(conn, QUERIES["instance_list"])]
