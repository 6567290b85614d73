"""The views of scripts: a revision (path, number, digest, size, who saved it and from
where), one with its text, the answer of a save, and a diff between two revisions."""

from __future__ import annotations

from qinglong.domain.scripts import ScriptFile, ScriptRevision
from qinglong.service.views.base import Instant, ViewModel, instant


class ScriptView(ViewModel):
    project_id: str
    path: str
    revision: int
    digest: str | None  # None: removed at this revision
    size_bytes: int | None
    source: str
    created_by: str
    created_at: Instant


class ScriptContentView(ScriptView):
    content: str


class ScriptSaveView(ScriptView):
    changed: bool  # False: the script already had this content (nothing was written)
    # the tasks that run this script, re-published to run the new content
    tasks_updated: list[str]
    # the tasks that run it and were left on an older revision (--keep-tasks)
    tasks_behind: list[str]


class ScriptDiffView(ViewModel):
    project_id: str
    path: str
    from_revision: int
    to_revision: int
    from_digest: str | None
    to_digest: str | None
    diff: str  # unified diff, empty when the contents are the same


def script_view(revision: ScriptRevision) -> ScriptView:
    return ScriptView(project_id=revision.project_id, path=revision.path,
                      revision=revision.revision, digest=revision.digest,
                      size_bytes=revision.size_bytes, source=revision.source,
                      created_by=revision.created_by,
                      created_at=instant(revision.created_at_ms))


def content_view(found: ScriptFile) -> ScriptContentView:
    return script_view(found.revision).extended(ScriptContentView, content=found.text)
