"""The processes serving a database, as the surfaces ask for them: the list the panel and
`/api/v1/health` show, and the registration a long-running process keeps while it serves
(one live process per id: storage/instances.py)."""

from __future__ import annotations

from collections.abc import Mapping

from qinglong.storage.instances import INSTANCE_STALE_MS, Instance, InstanceStore, Registration

__all__ = ["INSTANCE_STALE_MS", "Instance", "Processes", "Registration", "alive"]


def alive(item: Instance, now_ms: int) -> bool:
    """Seen within the staleness window and not stopped."""
    return item.stopped_at_ms is None and now_ms - item.seen_at_ms <= INSTANCE_STALE_MS


class Processes:
    def __init__(self, store: InstanceStore) -> None:
        self._store = store

    def listed(self) -> list[Instance]:
        return self._store.instance_list()

    def offers(self, now_ms: int) -> list[Mapping[str, str | None]]:
        """The labels each executor alive at ``now_ms`` offers (a worker, or `ql serve`)."""
        return [item.labels for item in self.listed()
                if item.role in ("worker", "serve") and alive(item, now_ms)]

    def register(self, instance_id: str, role: str, host: str, pid: int) -> Registration:
        """Serve under ``instance_id`` (InstanceHeld while a live process holds it)."""
        return self._store.instance_start(instance_id, role, host, pid)

    def beat(self, instance_id: str) -> bool:
        """Still alive; False when this process no longer holds the id."""
        return self._store.instance_beat(instance_id)

    def stopped(self, instance_id: str) -> None:
        self._store.instance_stop(instance_id)
