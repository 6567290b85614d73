"""The script store: a project's files, each save an immutable revision, content kept once by
its SHA-256 (docs/scripts.md). Written once over the kernel's ``Database``.

A save moves the path's head from the revision the writer read to the next one
(compare-and-set: a concurrent save is refused, never overwritten), writes the revision and,
if the bytes are new, the content. Saving the bytes the head already has writes nothing. A
removal is a revision without content; the history stays, and so does every content a task
or a Run still pins.
"""

from __future__ import annotations

from dataclasses import dataclass

from qinglong.domain.identifiers import actor_name
from qinglong.domain.scripts import (
    ScriptFile,
    ScriptRevision,
    check_content,
    check_digest,
    check_path,
    check_prefix,
    check_source,
    digest_of,
    verified,
)
from qinglong.errors import Conflict, InvalidInput, NotFound, RecordCorrupt
from qinglong.storage.dbapi import Row
from qinglong.storage.kernel import Database, Tx

MAX_HISTORY = 1000


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptSave:
    """A save of ``content`` at ``path``; ``expected_revision`` (the revision the editor
    loaded, 0 for a new file) makes it refuse a head that moved since."""

    project_id: str
    path: str
    content: bytes
    actor: str
    source: str = "put"
    expected_revision: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SaveResult:
    revision: ScriptRevision
    changed: bool  # False: the head already had these bytes, nothing was written


def revision_from_row(row: Row) -> ScriptRevision:
    digest = row["digest"]
    size = row.get("size_bytes")
    if digest is not None and size is None:
        raise RecordCorrupt(f"script {row['project_id']}/{row['path']}@{row['revision']}: "
                            "its content is missing")
    return ScriptRevision(
        project_id=str(row["project_id"]), path=str(row["path"]),
        revision=int(row["revision"]),
        digest=None if digest is None else str(digest).strip(),
        size_bytes=None if size is None else int(size),
        source=str(row["source"]), created_by=str(row["created_by"]),
        created_at_ms=int(row["created_at_ms"]))


def _bytes(value: object) -> bytes:
    if isinstance(value, memoryview):
        return value.tobytes()
    if isinstance(value, bytes):
        return value
    raise RecordCorrupt("a script's content is not stored as bytes")


def _active_project(tx: Tx, project_id: str, *, writing: bool) -> None:
    row = tx.one("script_project", {"project_id": project_id})
    if row is None:
        raise NotFound("project", project_id)
    if writing and row["status"] != "active":
        raise Conflict(f"project {project_id!r} is archived: unarchive it to change its "
                       "scripts")


class ScriptStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    # -- writes -------------------------------------------------------------------------

    def save(self, save: ScriptSave) -> SaveResult:
        path = check_path(save.path)
        content = check_content(save.content, path)
        source = check_source(save.source)
        digest = digest_of(content)

        def work(tx: Tx) -> SaveResult:
            _active_project(tx, save.project_id, writing=True)
            head = tx.one("script_head", {"project_id": save.project_id, "path": path})
            current = 0 if head is None else int(head["revision"])
            live = head is not None and head["digest"] is not None
            # a removed script is saved again as a new one (0), or from its removal
            expected = save.expected_revision
            _check_expected(current if expected == 0 and not live else expected, current, path)
            if head is not None and head["digest"] is not None and \
                    str(head["digest"]).strip() == digest:
                return SaveResult(revision=self._revision(tx, save.project_id, path, current),
                                  changed=False)
            now = tx.now_ms()
            tx.execute("script_blob_insert", {"digest": digest, "size_bytes": len(content),
                                              "content": content, "now_ms": now})
            return SaveResult(revision=self._advance(tx, save.project_id, path, current,
                                                     digest, source, save.actor, now),
                              changed=True)

        return self._db.write("script save", work)

    def remove(self, project_id: str, path: str, actor: str,
               expected_revision: int | None = None, source: str = "rm") -> ScriptRevision:
        path = check_path(path)
        check_source(source)

        def work(tx: Tx) -> ScriptRevision:
            _active_project(tx, project_id, writing=True)
            head = tx.one("script_head", {"project_id": project_id, "path": path})
            if head is None or head["digest"] is None:
                raise NotFound("script", path)
            current = int(head["revision"])
            _check_expected(expected_revision, current, path)
            return self._advance(tx, project_id, path, current, None, source, actor,
                                 tx.now_ms())

        return self._db.write("script remove", work)

    def _advance(self, tx: Tx, project_id: str, path: str, current: int, digest: str | None,
                 source: str, actor: str, now: int) -> ScriptRevision:
        key = {"project_id": project_id, "path": path, "revision": current + 1,
               "digest": digest, "now_ms": now}
        if current == 0:
            tx.execute("script_head_insert", key)
        elif tx.execute("script_head_move", {**key, "expected": current}).rowcount != 1:
            raise Conflict(f"script {path!r} changed while it was being saved; try again")
        tx.execute("script_revision_insert", {**key, "source": source,
                                              "created_by": actor_name(actor)})
        return self._revision(tx, project_id, path, current + 1)

    # -- reads --------------------------------------------------------------------------

    def listing(self, project_id: str, prefix: str = "", *,
             removed: bool = False) -> list[ScriptRevision]:
        folder = check_prefix(prefix)

        def work(tx: Tx) -> list[ScriptRevision]:
            _active_project(tx, project_id, writing=False)
            rows = tx.all("script_list", {"project_id": project_id, "prefix": folder,
                                          "removed": removed})
            return [revision_from_row(row) for row in rows]

        return self._db.read("script list", work)

    def history(self, project_id: str, path: str,
                limit: int = MAX_HISTORY) -> list[ScriptRevision]:
        path = check_path(path)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_HISTORY:
            raise InvalidInput("limit", f"must be 1 to {MAX_HISTORY}")

        def work(tx: Tx) -> list[ScriptRevision]:
            _active_project(tx, project_id, writing=False)
            rows = tx.all("script_history", {"project_id": project_id, "path": path,
                                             "limit": limit})
            if not rows:
                raise NotFound("script", path)
            return [revision_from_row(row) for row in rows]

        return self._db.read("script history", work)

    def head(self, project_id: str, path: str) -> ScriptRevision:
        """The current revision of a script that exists (NotFound when it never did or was
        removed)."""
        path = check_path(path)

        def work(tx: Tx) -> ScriptRevision:
            _active_project(tx, project_id, writing=False)
            row = tx.one("script_head", {"project_id": project_id, "path": path})
            if row is None or row["digest"] is None:
                raise NotFound("script", path)
            return self._revision(tx, project_id, path,
                                  int(row["revision"]))

        return self._db.read("script head", work)

    def get(self, project_id: str, path: str, revision: int | None = None) -> ScriptFile:
        """A revision's content (the head's when ``revision`` is None), verified against its
        digest."""
        path = check_path(path)
        if revision is not None and (isinstance(revision, bool) or not isinstance(revision, int)
                                     or revision < 1):
            raise InvalidInput("revision", "must be a revision number from 1")

        def work(tx: Tx) -> ScriptFile:
            _active_project(tx, project_id, writing=False)
            wanted = revision
            if wanted is None:
                head = tx.one("script_head", {"project_id": project_id, "path": path})
                if head is None or head["digest"] is None:
                    raise NotFound("script", path)
                wanted = int(head["revision"])
            row = tx.one("script_revision_get", {"project_id": project_id, "path": path,
                                                 "revision": wanted})
            if row is None:
                raise NotFound("script revision", f"{path}@{wanted}")
            found = revision_from_row(row)
            if found.digest is None:
                raise NotFound("script revision", f"{path}@{wanted} (removed at that revision)")
            content = verified(_bytes(row["content"]), found.digest,
                               f"script {project_id}/{path}@{wanted}")
            return ScriptFile(revision=found, content=content)

        return self._db.read("script get", work)

    def content(self, digest: str) -> bytes:
        """The bytes whose SHA-256 is ``digest``, verified (what a worker runs)."""
        check_digest(digest)

        def work(tx: Tx) -> bytes:
            row = tx.one("script_blob_get", {"digest": digest})
            if row is None:
                raise NotFound("script content", digest)
            return verified(_bytes(row["content"]), digest, f"script content {digest[:12]}")

        return self._db.read("script content", work)

    @staticmethod
    def _revision(tx: Tx, project_id: str, path: str, revision: int) -> ScriptRevision:
        row = tx.one("script_history_one", {"project_id": project_id, "path": path,
                                            "revision": revision})
        if row is None:
            raise RecordCorrupt(f"script {project_id}/{path}: revision {revision} is missing")
        return revision_from_row(row)


def _check_expected(expected: int | None, current: int, path: str) -> None:
    if expected is None or expected == current:
        return
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        raise InvalidInput("expected_revision", "must be a revision number (0: a new file)")
    now = "does not exist" if current == 0 else f"is at revision {current}"
    raise Conflict(f"script {path!r} {now}, not {expected}: someone saved it since; reload "
                   "it and apply your change again")
