"""Run output kept in the database (``Capabilities.logs_in_database``: the cluster's workers
stream it in): chunks stored under the Attempt's lease, read back in order, pruned past
retention.

- ``log_append``: store chunks under an Attempt's lease (fenced: nothing is stored once the
  lease is gone; idempotent: a chunk sent twice is stored once) and drop tail chunks that end
  before ``keep_tail_from`` (the head and the latest tail are kept).
- ``log_read``: the chunks of an Attempt after ``after_seq``, in order.
- ``log_prune``: delete the chunks of up to ``limit`` Attempts that ended longer ago than
  ``retention_ms`` (by the store's clock); the number of chunks deleted.
"""

from __future__ import annotations

from qinglong.domain.lifecycle import LeaseFence
from qinglong.storage.kernel import Database, Tx
from qinglong.storage.runs.params import LogChunk


class LogStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def log_append(self, fence: LeaseFence, chunks: tuple[LogChunk, ...],
                   keep_tail_from: int) -> bool:
        """False when the fence no longer holds (nothing was stored)."""
        key = {"attempt_id": fence.attempt_id, "generation": fence.generation,
               "digest": fence.digest}

        def append(tx: Tx) -> bool:
            holds = tx.one("log_fence_holds", key)
            if not holds or not holds["holds"]:
                return False
            for chunk in chunks:
                tx.execute("log_append", {**key, "seq": chunk.seq, "part": chunk.part,
                                          "byte_offset": chunk.byte_offset, "data": chunk.data})
            if keep_tail_from > 0:
                tx.execute("log_trim", {"attempt_id": fence.attempt_id,
                                        "keep_from": keep_tail_from})
            return True

        return self._db.write("store log output", append, isolation="read committed")

    def log_read(self, attempt_id: str, after_seq: int = -1) -> list[LogChunk]:
        rows = self._db.read("read log output", lambda tx: tx.all(
            "log_read", {"attempt_id": attempt_id, "after_seq": after_seq}))
        return [LogChunk(seq=int(r["seq"]), part=r["part"], byte_offset=int(r["byte_offset"]),
                         data=bytes(r["data"])) for r in rows]

    def log_prune(self, retention_ms: int, limit: int) -> int:
        return self._db.write("prune old log output", lambda tx: tx.execute(
            "log_prune", {"retention_ms": retention_ms, "limit": limit}).rowcount,
            isolation="read committed")
