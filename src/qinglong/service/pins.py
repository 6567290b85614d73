"""A user's pins and saved filters (``/api/v1/me/pins``, ``/api/v1/me/filters``).

What a tenant may learn: a pin names a task or trigger of a project the user may read when
pinning it (a project the user may not read is refused as every project route refuses it,
403 whether or not it exists, before the store is asked whether the task exists); the list of
pins keeps only the projects the user may read now (a grant taken back hides its pins).
Saved filters are the user's own text: applying one asks the API as any other query does.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TypeVar

from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.organise import (
    check_filter_name,
    check_filter_page,
    check_filter_query,
    check_kind,
)
from qinglong.errors import NotFound
from qinglong.service.access import require_on
from qinglong.service.accounts import Level, Principal
from qinglong.service.views.base import ViewModel, instant
from qinglong.service.views.organise import PinView, SavedFilterView
from qinglong.storage.pins import Pin, PinKey, PinStore, SavedFilter, SavedFilterPutParams

V = TypeVar("V", bound=ViewModel)


def pin_view(pin: Pin) -> PinView:
    return PinView(project=pin.project_id, kind=pin.kind, id=pin.entity_id,
                   pinned_at=instant(pin.pinned_at_ms), pinned_at_ms=pin.pinned_at_ms)


def saved_filter_view(found: SavedFilter) -> SavedFilterView:
    return SavedFilterView(name=found.name, page=found.page, query=found.query,
                           saved_at=instant(found.saved_at_ms), saved_at_ms=found.saved_at_ms)


class Pins:
    def __init__(self, store: PinStore) -> None:
        self._store = store

    def _key(self, who: Principal, kind: str, project: str, entity: str) -> PinKey:
        check_kind(kind)
        project_id(project)
        entity_id(entity, kind)
        require_on(who, Level.READ, project)  # before anything of the project is read
        return PinKey(username=who.username, project_id=project, kind=kind, entity_id=entity)

    def pin(self, who: Principal, kind: str, project: str, entity: str) -> tuple[PinView, bool]:
        """Pin a live task or trigger of a project ``who`` may read; True when new."""
        key = self._key(who, kind, project, entity)
        added = self._store.pin_add(key)
        for pin in self._store.pin_list(who.username):
            if (pin.project_id, pin.kind, pin.entity_id) == (project, kind, entity):
                return pin_view(pin), added
        raise NotFound(kind, entity)  # (deleted meanwhile)

    def unpin(self, who: Principal, kind: str, project: str, entity: str) -> None:
        if not self._store.pin_remove(self._key(who, kind, project, entity)):
            raise NotFound("pin", f"{kind} {project}/{entity}")

    def pinned(self, who: Principal, kind: str) -> set[tuple[str, str]]:
        """The (project, id) of each task or trigger (``kind``) ``who`` pinned."""
        return {(p.project_id, p.entity_id) for p in self._store.pin_list(who.username)
                if p.kind == kind}

    def marked(self, who: Principal, kind: str, views: Sequence[V],
               mine: set[tuple[str, str]] | None = None) -> list[V]:
        """``views`` (of tasks or triggers: their ``project`` and ``task`` or ``trigger``),
        each with ``pinned`` saying whether ``who`` pinned it (``mine``, when the caller
        read them already; else one read of the pins)."""
        if mine is None:
            mine = self.pinned(who, kind)
        found = []
        for view in views:
            key = view.model_dump(include={"project", kind})
            found.append(view.model_copy(update={"pinned": (key["project"], key[kind]) in mine}))
        return found

    def pins(self, who: Principal, visible: Collection[str] | None) -> list[PinView]:
        """``who``'s pins of live tasks and triggers in the projects ``visible`` (None:
        every project), oldest first."""
        return [pin_view(pin) for pin in self._store.pin_list(who.username)
                if visible is None or pin.project_id in visible]

    def save_filter(self, who: Principal, name: str, page: str,
                    query: Mapping[str, object]) -> SavedFilterView:
        return saved_filter_view(self._store.saved_filter_put(SavedFilterPutParams(
            username=who.username, name=check_filter_name(name), page=check_filter_page(page),
            query=check_filter_query(query))))

    def filters(self, who: Principal, page: str | None = None) -> list[SavedFilterView]:
        return [saved_filter_view(found) for found in self._store.saved_filter_list(
            who.username, None if page is None else check_filter_page(page))]

    def remove_filter(self, who: Principal, name: str) -> None:
        if not self._store.saved_filter_remove(who.username, check_filter_name(name)):
            raise NotFound("saved filter", name)
