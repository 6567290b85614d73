"""The definition store: projects, tasks and triggers, written once over the kernel.

Publishing appends an immutable revision (a no-op when nothing changed); deleting hides a
task or trigger head and stops it, keeping its revisions for the Runs and the audit that
refer to them (publishing again restores it). Every write is one SERIALIZABLE (PostgreSQL)
or ``BEGIN IMMEDIATE`` (SQLite) transaction at one reading of the database's clock, and
wakes the schedulers (``schedules``) when it commits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from qinglong.domain.model import TaskView
from qinglong.storage.definitions import pauses
from qinglong.storage.definitions.reader import DefinitionReader as Reader
from qinglong.storage.definitions.writer import DefinitionWriter as Writer
from qinglong.storage.kernel import Database, Tx
from qinglong.storage.units import reads, writes

T = TypeVar("T")


class DefinitionStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def _write(self, action: str, work: Callable[[Writer], T]) -> T:
        def run(tx: Tx) -> T:
            result = work(Writer(tx, self._db.capabilities.executor_type, tx.now_ms()))
            tx.wake("schedules")
            return result

        return self._db.write(action, run)

    def _read(self, action: str, work: Callable[[Reader], T]) -> T:
        return self._db.read(action, lambda tx: work(Reader(tx)))

    # -- projects -----------------------------------------------------------------------

    project_create = writes("create project", Writer.project_create)
    project_archive = writes("archive project", Writer.project_archive)
    project_unarchive = writes("unarchive project", Writer.project_unarchive)
    project_get = reads("read project", Reader.project_get)
    project_list = reads("list projects", Reader.project_list)
    project_pause = writes("pause project", pauses.project_pause)
    project_resume = writes("resume project", pauses.project_resume)
    global_limit_get = reads("read the global limit", Reader.global_limit_get)
    global_limit_set = writes("set the global limit", Writer.global_limit_set)

    # -- tasks --------------------------------------------------------------------------

    task_publish = writes("publish task", Writer.task_publish)

    def task_get(self, project: str, task: str) -> TaskView:
        return self._read("read task", lambda r: r.task_get(project, task, include_deleted=True))

    task_history = reads("read task history", Reader.task_history)
    task_list = reads("list tasks", Reader.task_list)
    task_delete = writes("delete task", Writer.task_delete)

    # -- triggers -----------------------------------------------------------------------

    trigger_publish = writes("publish trigger", Writer.trigger_publish)
    trigger_list = reads("list triggers", Reader.trigger_list)
    trigger_delete = writes("delete trigger", Writer.trigger_delete)
    trigger_pause = writes("pause trigger", pauses.trigger_pause)
    trigger_resume = writes("resume trigger", pauses.trigger_resume)
