"""The dependency-set store: every change of a project's set, the latest being its current
set (docs/dependencies.md). Written once over the kernel."""

from __future__ import annotations

import json
from collections.abc import Callable

from qinglong.domain.deps import DepSet, DepsRevision
from qinglong.domain.identifiers import actor_name
from qinglong.errors import Conflict, InvalidInput, NotFound, RecordCorrupt
from qinglong.storage.dbapi import Row
from qinglong.storage.kernel import Database, Tx
from qinglong.storage.records import json_object

MAX_HISTORY = 1000


def _revision(row: Row) -> DepsRevision:
    what = f"dependency set {row['project_id']}#{row['revision']}"
    try:
        deps = DepSet.from_json(json_object(row["set_json"], what))
    except (InvalidInput, KeyError, TypeError) as exc:
        raise RecordCorrupt(f"{what}: its stored set is unreadable ({exc})") from None
    digest = str(row["digest"]).strip()
    if deps.digest != digest:
        raise RecordCorrupt(f"{what}: its set does not match its digest {digest[:12]}")
    return DepsRevision(project_id=str(row["project_id"]), revision=int(row["revision"]),
                        deps=deps, digest=digest, actor=str(row["created_by"]),
                        created_at_ms=int(row["created_at_ms"]))


def _project(tx: Tx, project_id: str, *, writing: bool) -> None:
    row = tx.one("script_project", {"project_id": project_id})
    if row is None:
        raise NotFound("project", project_id)
    if writing and row["status"] != "active":
        raise Conflict(f"project {project_id!r} is archived: unarchive it to change its "
                       "dependencies")


class DepStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def change(self, project_id: str, edit: Callable[[DepSet], DepSet],
               actor: str) -> tuple[DepsRevision, bool]:
        """Apply ``edit`` to the current set (the empty set before the first change) and
        record the result as the next revision, unless it is the same set; the revision now
        current and whether this made it."""
        who = actor_name(actor)

        def work(tx: Tx) -> tuple[DepsRevision, bool]:
            _project(tx, project_id, writing=True)
            row = tx.one("deps_current", {"project_id": project_id})
            current = None if row is None else _revision(row)
            after = edit(DepSet() if current is None else current.deps)
            if current is not None and after == current.deps:
                return current, False
            if current is None and after.empty:
                raise InvalidInput("deps", "name at least one package (--python or --node)")
            number = 1 if current is None else current.revision + 1
            tx.execute("deps_insert", {
                "project_id": project_id, "revision": number, "digest": after.digest,
                "set_json": json.dumps(after.to_json(), sort_keys=True),
                "created_by": who, "now_ms": tx.now_ms()})
            made = tx.one("deps_current", {"project_id": project_id})
            assert made is not None
            return _revision(made), True

        return self._db.write("deps change", work)

    def current(self, project_id: str) -> DepsRevision | None:
        """The project's current set (None before its first change)."""
        def work(tx: Tx) -> DepsRevision | None:
            row = tx.one("deps_current", {"project_id": project_id})
            return None if row is None else _revision(row)

        return self._db.read("deps current", work)

    def recent(self, project_id: str, limit: int = 10) -> list[DepsRevision]:
        """The project's latest revisions, newest first (what an executor reads: the current
        set and those a script Run may fall back to)."""
        return self._db.read("deps recent", lambda tx: [
            _revision(r) for r in tx.all("deps_history", {"project_id": project_id,
                                                          "limit": limit})])

    def show(self, project_id: str) -> DepsRevision | None:
        """The current set of a project that must exist (NotFound otherwise)."""
        def work(tx: Tx) -> DepsRevision | None:
            _project(tx, project_id, writing=False)
            row = tx.one("deps_current", {"project_id": project_id})
            return None if row is None else _revision(row)

        return self._db.read("deps show", work)

    def history(self, project_id: str, limit: int = 50) -> list[DepsRevision]:
        if not 1 <= limit <= MAX_HISTORY:
            raise InvalidInput("limit", f"must be between 1 and {MAX_HISTORY}")

        def work(tx: Tx) -> list[DepsRevision]:
            _project(tx, project_id, writing=False)
            return [_revision(r) for r in tx.all("deps_history", {"project_id": project_id,
                                                                  "limit": limit})]

        return self._db.read("deps history", work)
