"""The task and execution revisions a batch of admissions pins, verified once per committer.

A revision is never changed once written: no role may update or delete a row of
``task_definition_revisions`` or ``task_execution_revisions`` (postgres/roles.py; SQLite
has no other writer than this program, which only inserts them). So the task revision a
trigger pins, and the execution revision pinned to that, read and verified once (the task's
digest, the plan's digest, its match to the task, and the task revision's ``enabled``) stay
what they were. What can change -- whether the trigger may still fire: its head, its task's
head and the project -- is re-read in every commit transaction (``schedule_facts_batch``'s
eligibility), and so is the trigger revision, whose digest is checked again (claims.py:
``REVISIONS``).
The cache only spares reading, sending and parsing the same task revision and plan for every
row. Each committer keeps its own: it serves one database, and the same key in another
database (a test's, a restored copy) may name other content.

What it gives up: a task revision or plan changed behind the schema's back (by a superuser,
or in the SQLite file) after this committer verified it is no longer refused by this
committer's admissions (a committer that has not read it yet still refuses it). It is
refused where it would matter: a worker verifies every plan against its digest when it
leases the Run (a tampered plan comes with its problem, never its command).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from qinglong.domain.task import ExecutionRevision, TaskRevision
from qinglong.errors import RecordCorrupt
from qinglong.storage import records

PINNED_REVISIONS = 1024  # task revisions kept verified: more than a batch holds

Key = tuple[str, str, int, str]  # project, task, task revision, executor type
# The execution revision, or why it cannot be used: only an admission needs it.
Pinned = tuple[TaskRevision, ExecutionRevision | RecordCorrupt]


class PinnedRevisions:
    """Verified (task revision, execution revision) pairs by key; bounded (LRU). A pair whose
    execution revision is missing or fails is not kept: it is read again next time."""

    def __init__(self, size: int = PINNED_REVISIONS) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[Key, Pinned] = OrderedDict()

    def known(self, keys: Iterable[Key]) -> dict[Key, Pinned]:
        """The entries held for ``keys``, taken together: what the caller uses for the whole
        batch, whatever another thread evicts meanwhile."""
        found: dict[Key, Pinned] = {}
        with self._lock:
            for key in keys:
                hit = self._entries.get(key)
                if hit is not None:
                    self._entries.move_to_end(key)
                    found[key] = hit
        return found

    def verify(self, key: Key, row: Any) -> Pinned:
        """The revisions read for ``key`` (the row's ``k_`` and ``e_`` columns), verified;
        RecordCorrupt if the task revision is missing or fails its checks, and in place of
        the execution revision if that one does."""
        project, task, revision, _ = key
        if row["k_revision"] is None:
            raise RecordCorrupt(f"task revision {project}/{task}@{revision} is missing")
        task_revision = records.candidate_task_revision(row)
        if (task_revision.project_id, task_revision.task_id, task_revision.revision) != (
                project, task, revision):
            raise RecordCorrupt(f"task revision {project}/{task}@{revision} came back as another")
        try:
            execution = _execution(key, row, task_revision.content_digest)
        except RecordCorrupt as exc:
            return task_revision, exc
        pinned: Pinned = (task_revision, execution)
        with self._lock:
            self._entries[key] = pinned
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return pinned


def _execution(key: Key, row: Any, task_digest: str) -> ExecutionRevision:
    project, task, revision, executor_type = key
    if row["e_project_id"] is None:
        raise RecordCorrupt(f"execution revision of {project}/{task}@{revision} is missing")
    execution = records.execution_revision(records.prefixed(row, "e_"))
    if execution.executor_type.value != executor_type:
        raise RecordCorrupt(f"execution revision is not a {executor_type} plan")
    if execution.source_content_digest != task_digest:
        raise RecordCorrupt("execution revision does not match the pinned task digest")
    return execution

