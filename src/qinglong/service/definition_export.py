"""``ql export``: the stored definitions as files would state them (docs/controls/apply.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from qinglong.domain.flow import FlowRevision
from qinglong.domain.model import ProjectStatus
from qinglong.domain.task import DepsInstallCommand, RepoPullCommand
from qinglong.service.definition_env import STORED_NOTE, exported_env
from qinglong.service.definition_flows import exported_flow
from qinglong.service.definition_model import DesiredProject, DesiredTask, DesiredTrigger
from qinglong.storage.definitions import DefinitionStore


def export_definitions(store: DefinitionStore, project_ids: Sequence[str] | None = None,
                       flows: Callable[[str], list[FlowRevision]] | None = None
                       ) -> tuple[list[DesiredProject], list[str]]:
    """The stored definitions as files would state them (plain environment values as they
    are, secrets as ``{secret: stored}``), and notes on what a file cannot say (a secret's
    value, a stale pin). Without ``project_ids`` every active project; archived ones are left
    out."""
    notes: list[str] = []
    if project_ids:
        projects = [store.project_get(p) for p in dict.fromkeys(project_ids)]
    else:
        projects = []
        for project in store.project_list():
            if project.status is ProjectStatus.ARCHIVED:
                notes.append(f"project {project.id!r} is archived and was left out")
            else:
                projects.append(project)
    exported = []
    for project in sorted(projects, key=lambda p: p.id):
        if project.status is ProjectStatus.ARCHIVED:
            notes.append(f"project {project.id!r} is archived: ql apply refuses it until "
                         "it is unarchived")
        desired = DesiredProject(project_id=project.id,
                                 name=None if project.name == project.id else project.name)
        managed: set[str] = set()  # a subscription's pull task: ql repo keeps it, not files
        for view in store.task_list(project.id):
            task = view.revision
            spec = task.spec
            if isinstance(spec.command, RepoPullCommand | DepsInstallCommand):
                managed.add(task.task_id)
                continue
            env, secrets = exported_env(spec.environment)
            if secrets:
                names = ", ".join(secrets)
                notes.append(f"task {project.id}/{task.task_id}: {names} "
                             f"{'is a secret' if len(secrets) == 1 else 'are secrets'}: "
                             f"{STORED_NOTE}")
            desired.tasks[task.task_id] = DesiredTask(
                project_id=project.id, task_id=task.task_id, name=task.name,
                command=spec.command, env=env,
                working_directory=spec.working_directory, timeout_ms=spec.timeout_ms,
                retry=spec.retry, idempotent=spec.idempotent,
                concurrency=spec.concurrency, requires=spec.requires, limits=spec.limits,
                parameters=spec.parameters,
                enabled=task.enabled)
        for trigger_view in store.trigger_list(project.id, None):
            trigger = trigger_view.revision
            if trigger.task_id in managed:
                continue
            if trigger.enabled and not trigger_view.task_pin_current:
                task_now = desired.tasks.get(trigger.task_id)
                if task_now is not None and task_now.enabled:
                    notes.append(f"trigger {project.id}/{trigger.trigger_id} pins an older "
                                 "revision of its task; ql apply will re-pin it")
            desired.triggers[trigger.trigger_id] = DesiredTrigger(
                project_id=project.id, trigger_id=trigger.trigger_id,
                task_id=trigger.task_id, spec=trigger.spec, enabled=trigger.enabled)
        for revision in flows(project.id) if flows is not None else []:
            desired.flows[revision.flow_id] = exported_flow(revision)
        exported.append(desired)
    return exported, notes
