"""Run output in PostgreSQL: chunks streamed off the workers, fenced by the Attempt's lease."""

from __future__ import annotations

import psycopg

from qinglong.domain.lifecycle import LeaseFence
from qinglong.storage.dbapi import fetch_all, fetch_one
from qinglong.storage.ports import LogChunk
from qinglong.storage.postgres.connection import QUERIES, Connector
from qinglong.storage.postgres.errors import translate
from qinglong.storage.postgres.transactions import serializable


class PgLogStore:
    """RunLogStore on PostgreSQL."""

    def __init__(self, connector: Connector) -> None:
        self._connector = connector

    def log_append(self, fence: LeaseFence, chunks: tuple[LogChunk, ...],
                   keep_tail_from: int) -> bool:
        """False when the fence no longer holds (nothing was stored)."""
        key = {"attempt_id": fence.attempt_id, "generation": fence.generation,
               "digest": fence.digest}

        def append(conn: psycopg.Connection[dict[str, object]]) -> bool:
            holds = fetch_one(conn, QUERIES["log_fence_holds"], key)
            if not holds or not holds["holds"]:
                return False
            for chunk in chunks:
                conn.execute(QUERIES["log_append"], {
                    **key, "seq": chunk.seq, "part": chunk.part,
                    "byte_offset": chunk.byte_offset, "data": chunk.data})
            if keep_tail_from > 0:
                conn.execute(QUERIES["log_trim"], {"attempt_id": fence.attempt_id,
                                                   "keep_from": keep_tail_from})
            return True

        return serializable(self._connector, "store log output", append,
                            isolation="read committed")

    def log_read(self, attempt_id: str, after_seq: int = -1) -> list[LogChunk]:
        with self._connector.connection() as conn:
            try:
                rows = fetch_all(conn, QUERIES["log_read"],
                                 {"attempt_id": attempt_id, "after_seq": after_seq})
            except psycopg.Error as exc:
                raise translate(exc, "read log output", conn) from exc
        return [LogChunk(seq=int(r["seq"]), part=r["part"], byte_offset=int(r["byte_offset"]),
                         data=bytes(r["data"])) for r in rows]

    def log_prune(self, retention_ms: int, limit: int) -> int:
        def prune(conn: psycopg.Connection[dict[str, object]]) -> int:
            return conn.execute(QUERIES["log_prune"],
                                {"retention_ms": retention_ms, "limit": limit}).rowcount

        return serializable(self._connector, "prune old log output", prune,
                            isolation="read committed")
