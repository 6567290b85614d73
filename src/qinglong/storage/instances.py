"""What both instance stores share: the refusal of an id a live process holds."""

from __future__ import annotations

from qinglong.errors import InstanceHeld
from qinglong.storage.dbapi import Row
from qinglong.storage.ports import INSTANCE_STALE_MS


def refusal(instance_id: str, holder: Row | None, now_ms: int) -> InstanceHeld:
    """The error for a refused registration, naming its holder (``holder``: the row as read
    after the refusal, None when it could not be read)."""
    if holder is None or holder["pid"] is None:
        return InstanceHeld(instance_id, stale_ms=INSTANCE_STALE_MS)
    seen = int(holder["seen_at_ms"])
    return InstanceHeld(instance_id, role=str(holder["role"]), host=str(holder["host"]),
                        pid=int(holder["pid"]), seen_at_ms=seen, silent_ms=max(0, now_ms - seen),
                        stale_ms=INSTANCE_STALE_MS)
