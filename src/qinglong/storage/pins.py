"""The store of what a user keeps for themself: pins of tasks and triggers and saved filters
of the panel's pages (migrations 0028_pins / 0027_pins; queries/pins.sql), written once over
the kernel. Whether the user may read what a pin names is the service's question
(service/pins.py); the store keeps only what exists.

- ``pin_add`` pins a live task or trigger for a user (pinning it again keeps the first
  pin); NotFound when there is no such live one, Conflict past ``MAX_PINS``.
- ``pin_remove`` unpins it (False when it was not pinned).
- ``pin_list`` reads a user's pins of live tasks and triggers, oldest first.
- ``saved_filter_put`` saves a filter under a name, replacing the one of that name; Conflict
  past ``MAX_FILTERS`` names. ``saved_filter_list`` reads them (of one page, when asked), by
  name; ``saved_filter_remove`` deletes one (False when there was none).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from qinglong.domain.organise import MAX_FILTERS, MAX_PINS
from qinglong.errors import Conflict, NotFound
from qinglong.storage.dbapi import Row
from qinglong.storage.kernel import Database
from qinglong.storage.units import TxUnit, UnitStore, reads, writes


@dataclass(frozen=True, slots=True, kw_only=True)
class PinKey:
    username: str
    project_id: str
    kind: str  # task | trigger
    entity_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Pin:
    project_id: str
    kind: str
    entity_id: str
    pinned_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedFilterPutParams:
    username: str
    name: str
    page: str  # runs | dashboard | tasks
    query: dict[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class SavedFilter:
    name: str
    page: str
    query: dict[str, str]
    saved_at_ms: int


def _saved_filter(row: Row) -> SavedFilter:
    query: Any = json.loads(str(row["query"]))
    return SavedFilter(name=str(row["name"]), page=str(row["page"]),
                       query={str(k): str(v) for k, v in dict(query).items()},
                       saved_at_ms=int(row["saved_at_ms"]))


class PinRows(TxUnit):
    def pin_add(self, key: PinKey) -> bool:
        """True when the pin is new."""
        target = {"project_id": key.project_id, "entity_id": key.entity_id}
        if self._one(f"label_{key.kind}_live", target) is None:
            raise NotFound(key.kind, key.entity_id)
        added = self._run("pin_insert", {**target, "username": key.username, "kind": key.kind,
                                         "now_ms": self.now_ms}) == 1
        count = self._one("pin_count", {"username": key.username})
        if added and count is not None and int(count["pins"]) > MAX_PINS:
            raise Conflict(f"at most {MAX_PINS} pins: unpin one first")
        return added

    def pin_remove(self, key: PinKey) -> bool:
        return self._run("pin_delete", {"username": key.username, "project_id": key.project_id,
                                        "kind": key.kind, "entity_id": key.entity_id}) == 1

    def pin_list(self, username: str) -> list[Pin]:
        return [Pin(project_id=str(r["project_id"]), kind=str(r["kind"]),
                    entity_id=str(r["entity_id"]), pinned_at_ms=int(r["pinned_at_ms"]))
                for r in self._all("pin_list", {"username": username})]

    def saved_filter_put(self, params: SavedFilterPutParams) -> SavedFilter:
        key = {"username": params.username, "name": params.name}
        existed = self._one("saved_filter_get", key) is not None
        self._run("saved_filter_put", {**key, "page": params.page, "now_ms": self.now_ms,
                                       "query": json.dumps(params.query, sort_keys=True)})
        count = self._one("saved_filter_count", {"username": params.username})
        if not existed and count is not None and int(count["filters"]) > MAX_FILTERS:
            raise Conflict(f"at most {MAX_FILTERS} saved filters: delete one first")
        saved = self._one("saved_filter_get", key)
        assert saved is not None
        return _saved_filter(saved)

    def saved_filter_list(self, username: str, page: str | None = None) -> list[SavedFilter]:
        return [_saved_filter(r) for r in self._all("saved_filter_list",
                                                    {"username": username, "page": page})]

    def saved_filter_remove(self, username: str, name: str) -> bool:
        return self._run("saved_filter_delete", {"username": username, "name": name}) == 1


class PinStore(UnitStore[PinRows]):
    def __init__(self, db: Database) -> None:
        super().__init__(db, PinRows)

    pin_add = writes("pin", PinRows.pin_add)
    pin_remove = writes("unpin", PinRows.pin_remove)
    pin_list = reads("list pins", PinRows.pin_list)
    saved_filter_put = writes("save a filter", PinRows.saved_filter_put)
    saved_filter_list = reads("list saved filters", PinRows.saved_filter_list)
    saved_filter_remove = writes("delete a saved filter", PinRows.saved_filter_remove)
