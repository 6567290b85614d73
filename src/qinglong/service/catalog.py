"""Projects, tasks and triggers as the surfaces ask for them (views in, views out)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from qinglong.clock import Clock
from qinglong.domain.model import TaskView
from qinglong.domain.publishing import TaskPatch, merged_task_spec
from qinglong.domain.scripts import ScriptRef, interpreter_for
from qinglong.domain.task import Command, CommandSpec, ScriptCommand, ShellCommand
from qinglong.errors import InvalidInput, NotFound
from qinglong.service.labels import label_filter, with_labels
from qinglong.service.views.system import LimitsView
from qinglong.service.views.tasks import (
    ProjectView,
    TaskDiffView,
    TaskHistoryEntry,
    TaskPublishView,
    TaskShowView,
    project_view,
    task_diff,
    task_revision_view,
    task_view,
)
from qinglong.service.views.tasks import TaskView as TaskViewModel
from qinglong.service.views.triggers import TriggerPublishView, trigger_revision_view, trigger_view
from qinglong.service.views.triggers import TriggerView as TriggerViewModel
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    ProjectPauseParams,
    TaskPublishParams,
    TriggerPauseParams,
    TriggerPublishParams,
    TriggerResumeParams,
)
from qinglong.storage.labels import LabelStore
from qinglong.storage.scripts import ScriptStore


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskPublishRequest:
    project_id: str
    task_id: str
    patch: TaskPatch
    name: str | None = None  # None: keep (a new task is named after its id)
    enabled: bool | None = None  # None: keep (a new or deleted task is enabled)
    repin_triggers: bool = True
    # A shell command in ``patch`` runs with the current command's interpreter when that is a
    # shell command too (the caller did not choose one); otherwise with its own.
    keep_shell: bool = False


def _with_current_shell(patch: TaskPatch, current: Command) -> TaskPatch:
    """``patch`` with its shell command run by the interpreter ``current`` uses, if any."""
    command = patch.command
    if (isinstance(command, ShellCommand) and isinstance(current, ShellCommand)
            and command.shell != current.shell):
        return replace(patch, command=ShellCommand(command=command.command, shell=current.shell))
    return patch


class Catalog:
    def __init__(self, definitions: DefinitionStore, clock: Clock,
                 scripts: ScriptStore | None = None, labels: LabelStore | None = None) -> None:
        self._store = definitions
        self._clock = clock
        self._scripts = scripts
        self._labels = labels

    def pinned_script(self, project_id: str, ref: ScriptRef) -> ScriptCommand:
        """``ref`` pinned to the content its script has now (NotFound: no such script)."""
        if self._scripts is None:
            raise InvalidInput("script", "scripts are not available here")
        head = self._scripts.head(project_id, ref.path)
        assert head.digest is not None
        return ScriptCommand(path=ref.path, digest=head.digest,
                             interpreter=interpreter_for(ref.path, ref.interpreter).value,
                             args=ref.args)

    # -- projects -----------------------------------------------------------------------

    def project_create(self, project_id: str, name: str | None = None) -> ProjectView:
        return project_view(
            self._store.project_create(ProjectCreateParams(project_id=project_id, name=name)))

    def project_list(self) -> list[ProjectView]:
        return [project_view(p) for p in self._store.project_list()]

    def project_archive(self, project_id: str) -> ProjectView:
        return project_view(self._store.project_archive(project_id))

    def project_unarchive(self, project_id: str) -> ProjectView:
        return project_view(self._store.project_unarchive(project_id))

    def limits(self) -> LimitsView:
        """The limits as they are stored now (the global limit: None, no cap)."""
        return LimitsView(global_=self._store.global_limit_get())

    def global_limit_set(self, max_running: int | None) -> None:
        self._store.global_limit_set(max_running)

    # -- tasks --------------------------------------------------------------------------

    def task_publish(self, request: TaskPublishRequest) -> TaskPublishView:
        """Publish what the request changes on top of the current revision (compare-and-set
        on that revision, so a concurrent publish is never silently overwritten)."""
        head = self._current_task(request.project_id, request.task_id)
        current = head.revision if head else None
        restoring = head is not None and head.deleted_at_ms is not None
        patch = request.patch
        if isinstance(patch.command, ScriptRef):
            patch = replace(patch, command=self.pinned_script(request.project_id, patch.command))
        if request.keep_shell and current is not None:
            patch = _with_current_shell(patch, current.spec.command)
        spec = merged_task_spec(current.spec if current else None, patch)
        name = request.name if request.name is not None else (
            current.name if current else request.task_id)
        # deleting published a disabled revision: a deleted task comes back enabled
        enabled = request.enabled if request.enabled is not None else (
            current.enabled if current and not restoring else True)
        result = self._store.task_publish(TaskPublishParams(
            project_id=request.project_id, task_id=request.task_id, name=name, spec=spec,
            enabled=enabled, repin_triggers=request.repin_triggers,
            expected_revision=current.revision if current else None,
        ))
        return task_revision_view(result.revision).extended(
            TaskPublishView, created=result.created, restored=result.restored,
            repinned_triggers=list(result.repinned_triggers))

    def _current_task(self, project_id: str, task_id: str) -> TaskView | None:
        """The task's head (a deleted one too), or None for a task never published."""
        try:
            return self._store.task_get(project_id, task_id)
        except NotFound as exc:
            if exc.kind == "task":
                return None
            raise

    def task_set_enabled(self, project_id: str, task_id: str,
                         enabled: bool) -> TaskPublishView:
        current = self._store.task_get(project_id, task_id)
        if current.deleted_at_ms is not None:
            raise NotFound("task", task_id)
        return self.task_publish(TaskPublishRequest(project_id=project_id, task_id=task_id,
                                                    patch=TaskPatch(), enabled=enabled))

    def task_spec(self, project_id: str, task_id: str) -> CommandSpec:
        """A live task's current spec (NotFound for a deleted or unknown task)."""
        head = self._store.task_get(project_id, task_id)
        if head.deleted_at_ms is not None:
            raise NotFound("task", task_id)
        return head.revision.spec

    def task_specs(self, project_id: str) -> list[tuple[str, CommandSpec, bool]]:
        """Each live task of the project: its id, current spec and whether it is enabled."""
        return [(h.revision.task_id, h.revision.spec, h.revision.enabled)
                for h in self._store.task_list(project_id, False)]

    def script_tasks(self, project_id: str, path: str) -> list[tuple[str, ScriptCommand]]:
        """The live tasks of the project whose current revision runs the script ``path``."""
        found = []
        for head in self._store.task_list(project_id, False):
            command = head.revision.spec.command
            if isinstance(command, ScriptCommand) and command.path == path:
                found.append((head.revision.task_id, command))
        return found

    def task_list(self, project_id: str, include_deleted: bool = False,
                  label: str | None = None) -> list[TaskViewModel]:
        """The tasks of a project with their labels (only those labelled ``label``)."""
        views = [task_view(t) for t in self._store.task_list(
            project_id, include_deleted, label=label_filter(label))]
        if self._labels is None:
            return views
        return with_labels(views, self._labels.labels_of("task", project_id),
                           lambda v: (v.project, v.task))

    def task_show(self, project_id: str, task_id: str) -> TaskShowView:
        """The current revision, every revision before it, and what each one changed."""
        current = self._store.task_get(project_id, task_id)
        history = self._store.task_history(project_id, task_id)
        revisions = [
            task_revision_view(revision).extended(
                TaskHistoryEntry, changes=task_diff(history[index - 1], revision) if index else [])
            for index, revision in enumerate(history)]
        shown = task_view(current).extended(TaskShowView, history=revisions)
        if self._labels is None:
            return shown
        return with_labels([shown], self._labels.labels_of("task", project_id, task_id),
                           lambda v: (v.project, v.task))[0]

    def task_diff(self, project_id: str, task_id: str, old: int | None,
                  new: int | None) -> TaskDiffView:
        history = {r.revision: r for r in self._store.task_history(project_id, task_id)}
        last = max(history)
        to = last if new is None else new
        since = to - 1 if old is None else old
        for field, number in (("from", since), ("to", to)):
            if number not in history:
                raise InvalidInput(field, f"task {task_id!r} has revisions 1 to {last}")
        return TaskDiffView(project=project_id, task=task_id, from_=since, to=to,
                            changes=task_diff(history[since], history[to]))

    def task_delete(self, project_id: str, task_id: str) -> TaskViewModel:
        return task_view(self._store.task_delete(project_id, task_id))

    # -- triggers -----------------------------------------------------------------------

    def trigger_publish(self, params: TriggerPublishParams) -> TriggerPublishView:
        result = self._store.trigger_publish(params)
        return trigger_revision_view(result.revision).extended(
            TriggerPublishView, created=result.created, restored=result.restored)

    def trigger_list(self, project_id: str | None, *, next_count: int = 1,
                     include_deleted: bool = False, trigger_id: str | None = None,
                     label: str | None = None) -> list[TriggerViewModel]:
        """The triggers of a project (or every project) with their labels (only those
        labelled ``label``)."""
        now = self._clock.now_ms()
        views = [trigger_view(v, now_ms=now, next_count=next_count)
                 for v in self._store.trigger_list(project_id, trigger_id, include_deleted,
                                                   label=label_filter(label))]
        if self._labels is None:
            return views
        return with_labels(views, self._labels.labels_of("trigger", project_id, trigger_id),
                           lambda v: (v.project, v.trigger))

    def trigger_pause(self, params: TriggerPauseParams) -> TriggerViewModel:
        return trigger_view(self._store.trigger_pause(params),
                                  now_ms=self._clock.now_ms(), next_count=1)

    def trigger_resume(self, params: TriggerResumeParams) -> TriggerViewModel:
        return trigger_view(self._store.trigger_resume(params),
                                  now_ms=self._clock.now_ms(), next_count=1)

    def project_pause(self, params: ProjectPauseParams) -> list[TriggerViewModel]:
        now = self._clock.now_ms()
        return [trigger_view(v, now_ms=now, next_count=1)
                for v in self._store.project_pause(params)]

    def project_resume(self, params: ProjectPauseParams) -> list[TriggerViewModel]:
        now = self._clock.now_ms()
        return [trigger_view(v, now_ms=now, next_count=1)
                for v in self._store.project_resume(params)]

    def trigger_delete(self, project_id: str, trigger_id: str) -> TriggerViewModel:
        return trigger_view(self._store.trigger_delete(project_id, trigger_id),
                                  now_ms=self._clock.now_ms(), next_count=0)
