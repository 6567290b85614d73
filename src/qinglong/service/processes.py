"""The processes serving a database, as the surfaces ask for them: the list the panel and
`/api/v1/health` show, and the registration a long-running process keeps while it serves
(one live process per id: storage/instances.py)."""

from __future__ import annotations

from collections.abc import Mapping

from qinglong.storage.instances import INSTANCE_STALE_MS, Instance, InstanceStore, Registration

__all__ = ["INSTANCE_STALE_MS", "Instance", "Processes", "Registration"]


class Processes:
    def __init__(self, store: InstanceStore) -> None:
        self._store = store

    def listed(self) -> list[Instance]:
        return self._store.instance_list()

    def offers(self) -> list[Mapping[str, str | None]]:
        """The labels each live executor offers now (a worker, or `ql serve`): the one
        definition /metrics and the unplaceable notification use too."""
        return list(self._store.instance_offers())

    def register(self, instance_id: str, role: str, host: str, pid: int) -> Registration:
        """Serve under ``instance_id`` (InstanceHeld while a live process holds it)."""
        return self._store.instance_start(instance_id, role, host, pid)

    def beat(self, instance_id: str) -> bool:
        """Still alive; False when this process no longer holds the id."""
        return self._store.instance_beat(instance_id)

    def stopped(self, instance_id: str) -> None:
        self._store.instance_stop(instance_id)
