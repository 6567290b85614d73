"""The instance store: heartbeats of the processes serving the database, in the store's
clock. An instance id is held by one live process at a time.

``instance_start`` registers this process under an id that is new, stopped cleanly, silent
for INSTANCE_STALE_MS (its holder crashed), or this process's own earlier registration
(``resume``, after losing the database); ``locked`` (the caller holds a lock proving no other
process of its role runs, as `ql serve` does) also takes over a registration of the same
role. Otherwise it raises InstanceHeld, naming the holder. ``instance_beat`` (False when this
process no longer holds the id) and ``instance_stop`` touch only the registration this store
made. Each write commits under ``commit_deadline_s``: with synchronous replication a commit
waits for the standby, and a heartbeat must not hang its thread when the standby is gone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from qinglong.errors import InstanceHeld
from qinglong.storage.dbapi import Row
from qinglong.storage.kernel import Database, Tx
from qinglong.storage.records import json_object

# A registration whose heartbeat is this old (in the store's clock) and that never stopped
# cleanly belongs to a process taken for dead (a crash): its id may be registered again.
INSTANCE_STALE_MS = 30_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """A process that serves the database: a `ql serve`, a `ql control` replica, a worker."""

    instance_id: str
    role: str  # serve | control | worker | web
    host: str
    pid: int
    started_at_ms: int
    seen_at_ms: int
    stopped_at_ms: int | None
    labels: Mapping[str, str | None] = field(default_factory=dict)  # a worker's (placement)


@dataclass(frozen=True, slots=True, kw_only=True)
class Registration:
    """This process's hold on an instance id: what its heartbeats and its stop are fenced by."""

    instance_id: str
    host: str
    pid: int
    started_at_ms: int


def _labels(value: object) -> dict[str, str | None]:
    if value is None:
        return {}
    return json_object(value, "an instance's labels")  # type: ignore[return-value]


def live_offers(tx: Tx, now_ms: int,
                alive_ms: int = INSTANCE_STALE_MS) -> tuple[Mapping[str, str | None], ...]:
    """The labels each live executor offers at ``now_ms`` (the store's clock): a worker or
    `ql serve` seen within ``alive_ms`` and not stopped. What a queued Run's requirements are
    held against (``domain.placement.unplaceable``), by /metrics, ``GET /api/v1/queue`` and
    the unplaceable notification alike."""
    return tuple(_labels(row["labels"]) for row in tx.all(
        "metrics_live_offers", {"since_ms": now_ms - alive_ms}))


def instance_from_row(row: Row) -> Instance:
    stopped = row["stopped_at_ms"]
    return Instance(
        instance_id=row["instance_id"], role=row["role"], host=row["host"], pid=int(row["pid"]),
        started_at_ms=int(row["started_at_ms"]), seen_at_ms=int(row["seen_at_ms"]),
        stopped_at_ms=None if stopped is None else int(stopped), labels=_labels(row["labels"]),
    )


def refusal(instance_id: str, holder: Row | None, now_ms: int) -> InstanceHeld:
    """The error for a refused registration, naming its holder (``holder``: the row as read
    after the refusal, None when it could not be read)."""
    if holder is None or holder["pid"] is None:
        return InstanceHeld(instance_id, stale_ms=INSTANCE_STALE_MS)
    seen = int(holder["seen_at_ms"])
    return InstanceHeld(instance_id, role=str(holder["role"]), host=str(holder["host"]),
                        pid=int(holder["pid"]), seen_at_ms=seen, silent_ms=max(0, now_ms - seen),
                        stale_ms=INSTANCE_STALE_MS)


class InstanceStore:
    def __init__(self, db: Database, *, commit_deadline_s: float = 5.0) -> None:
        self._db = db
        self._commit_deadline_s = commit_deadline_s
        self._held: dict[str, Registration] = {}

    def _write(self, action: str, name: str, params: dict[str, object]) -> int:
        return self._db.write(action, lambda tx: tx.execute(
            name, {**params, **tx.clock_args()}).rowcount, isolation="read committed",
            commit_deadline_s=self._commit_deadline_s)

    def instance_start(self, instance_id: str, role: str, host: str, pid: int, *,
                       resume: Registration | None = None, locked: bool = False,
                       labels: Mapping[str, str | None] | None = None) -> Registration:
        """``labels``: what a worker offers for placement, recorded with its registration."""
        params = {"instance_id": instance_id, "role": role, "host": host, "pid": pid,
                  "stale_ms": INSTANCE_STALE_MS, "locked": locked,
                  "labels": json.dumps(dict(sorted(labels.items()))) if labels else None,
                  "resume_started_at_ms": None if resume is None else resume.started_at_ms}

        def start(tx: Tx) -> tuple[Row | None, Row | None]:
            clock = tx.clock_args()
            taken = tx.one("instance_start", {**params, **clock})
            holder = None if taken else tx.one("instance_holder",
                                               {"instance_id": instance_id, **clock})
            return taken, holder

        taken, holder = self._db.write("register this process", start,
                                       isolation="read committed",
                                       commit_deadline_s=self._commit_deadline_s)
        if taken is None:
            raise refusal(instance_id, holder, int(holder["now_ms"]) if holder else 0)
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
        return self._write("record a heartbeat", "instance_beat", params) == 1

    def instance_stop(self, instance_id: str) -> None:
        params = self._fenced(instance_id)
        if params is not None:
            self._write("record a clean stop", "instance_stop", params)
            self._held.pop(instance_id, None)

    def instance_offers(self) -> tuple[Mapping[str, str | None], ...]:
        """The labels each live executor offers now, by the store's clock (``live_offers``)."""
        return self._db.read("read live executors", lambda tx: live_offers(tx, tx.now_ms()))

    def instance_list(self) -> list[Instance]:
        rows = self._db.read("list instances", lambda tx: tx.all("instance_list"))
        return [instance_from_row(row) for row in rows]
