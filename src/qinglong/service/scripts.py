"""Scripts as the surfaces ask for them: save, read, list, diff, remove, history
(docs/scripts.md).

A save that changes a script re-publishes, in the same transaction, every task of the project
that runs it, pinned to the new content (their triggers re-pinned as any publish does), unless
the caller keeps them where they are. A Run already admitted runs what its revision pinned.
"""

from __future__ import annotations

import difflib

from qinglong.domain.publishing import TaskPatch
from qinglong.domain.scripts import ScriptRevision
from qinglong.domain.task import ScriptCommand
from qinglong.errors import InvalidInput
from qinglong.service.catalog import Catalog, TaskPublishRequest
from qinglong.service.units import as_one_unit
from qinglong.service.views.scripts import (
    ScriptContentView,
    ScriptDiffView,
    ScriptSaveView,
    ScriptView,
    content_view,
    script_view,
)
from qinglong.storage.kernel import Database
from qinglong.storage.scripts import ScriptSave, ScriptStore

MAX_DIFF_LINES = 20_000


class Scripts:
    def __init__(self, store: ScriptStore, catalog: Catalog, db: Database) -> None:
        self._store = store
        self._catalog = catalog
        self._db = db

    def put(self, project_id: str, path: str, content: bytes, actor: str, *,
            expected_revision: int | None = None, keep_tasks: bool = False,
            source: str = "put") -> ScriptSaveView:
        """Save ``content`` as the script's next revision (nothing when it is unchanged) and
        move the tasks that run it onto it."""
        def work() -> ScriptSaveView:
            saved = self._store.save(ScriptSave(
                project_id=project_id, path=path, content=content, actor=actor,
                source=source, expected_revision=expected_revision))
            updated, behind = self._follow(project_id, saved.revision, keep_tasks)
            return script_view(saved.revision).extended(
                ScriptSaveView, changed=saved.changed, tasks_updated=updated,
                tasks_behind=behind)

        return as_one_unit(self._db, "save a script", work)

    def _follow(self, project_id: str, revision: ScriptRevision,
                keep: bool) -> tuple[list[str], list[str]]:
        updated: list[str] = []
        behind: list[str] = []
        assert revision.digest is not None
        for task_id, command in self._catalog.script_tasks(project_id, revision.path):
            if command.digest == revision.digest:
                continue
            if keep:
                behind.append(task_id)
                continue
            moved = ScriptCommand(path=command.path, digest=revision.digest,
                                  interpreter=command.interpreter, args=command.args)
            self._catalog.task_publish(TaskPublishRequest(
                project_id=project_id, task_id=task_id, patch=TaskPatch(command=moved)))
            updated.append(task_id)
        return updated, behind

    def remove(self, project_id: str, path: str, actor: str,
               expected_revision: int | None = None,
               source: str = "rm") -> tuple[ScriptView, list[str]]:
        """Remove the script (a revision without content); the tasks that still run one of
        its revisions are named: they keep running what they pinned."""
        removed = self._store.remove(project_id, path, actor, expected_revision, source)
        still = [task for task, _ in self._catalog.script_tasks(project_id, path)]
        return script_view(removed), still

    def get(self, project_id: str, path: str, revision: int | None = None) -> ScriptContentView:
        return content_view(self._store.get(project_id, path, revision))

    def listing(self, project_id: str, prefix: str = "", *,
                removed: bool = False) -> list[ScriptView]:
        return [script_view(r) for r in self._store.listing(project_id, prefix,
                                                            removed=removed)]

    def history(self, project_id: str, path: str, limit: int = 100) -> list[ScriptView]:
        return [script_view(r) for r in self._store.history(project_id, path, limit)]

    def diff(self, project_id: str, path: str, from_revision: int | None = None,
             to_revision: int | None = None) -> ScriptDiffView:
        """The unified diff from one revision to another (default: the one before the head
        to the head; a removal diffs as empty content)."""
        history = self._store.history(project_id, path)
        by_number = {r.revision: r for r in history}
        to = to_revision if to_revision is not None else history[0].revision
        start = from_revision if from_revision is not None else max(to - 1, 0)
        for name, number in (("to", to), ("from", start)):
            if number != 0 and number not in by_number:
                raise InvalidInput(name, f"{path!r} has no revision {number} (it has 1 to "
                                         f"{history[0].revision})")
        old = self._text(project_id, path, by_number.get(start))
        new = self._text(project_id, path, by_number.get(to))
        lines = list(difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True),
            fromfile=f"{path}@{start}", tofile=f"{path}@{to}"))
        if len(lines) > MAX_DIFF_LINES:
            lines = [*lines[:MAX_DIFF_LINES], f"... {len(lines) - MAX_DIFF_LINES} more lines\n"]
        text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                       for line in lines)
        return ScriptDiffView(project_id=project_id, path=path, from_revision=start,
                              to_revision=to,
                              from_digest=by_number[start].digest if start else None,
                              to_digest=by_number[to].digest, diff=text)

    def _text(self, project_id: str, path: str, revision: ScriptRevision | None) -> str:
        if revision is None or revision.digest is None:
            return ""
        return self._store.get(project_id, path, revision.revision).text
