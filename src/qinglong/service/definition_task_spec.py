"""A definitions file's task as the spec a plan publishes: its command (a ``script:`` pinned
to the content its script has when the plan is made, docs/scripts.md) and every bound."""

from __future__ import annotations

from collections.abc import Callable

from qinglong.domain.model import TaskView
from qinglong.domain.scripts import ScriptRef
from qinglong.domain.task import (
    Command,
    CommandSpec,
    DepsInstallCommand,
    EnvEntry,
    RepoPullCommand,
    ScriptCommand,
)
from qinglong.errors import InvalidInput, NotFound
from qinglong.service.definition_model import DesiredTask, Issues
from qinglong.service.definition_plan import spec_key

ScriptPinner = Callable[[str, ScriptRef], ScriptCommand]


def pinned_command(task: DesiredTask, pin: ScriptPinner | None, issues: Issues) -> Command | None:
    """The task's command; a script pinned to its content now (None, with the problem in
    ``issues``, when there is no such script)."""
    if not isinstance(task.command, ScriptRef):
        return task.command
    if pin is None:
        issues.add(task.at("script"), task.field_name("script"), "scripts are not available here")
        return None
    try:
        return pin(task.project_id, task.command)
    except NotFound:
        issues.add(task.at("script"), task.field_name("script"),
                   f"there is no script {task.command.path!r} in project {task.project_id!r} "
                   "(ql script put saves one)")
    except InvalidInput as exc:
        issues.add(task.at("script"), task.field_name("script"), exc.rule)
    return None


def desired_spec(task: DesiredTask, command: Command, entries: list[EnvEntry],
                 issues: Issues) -> CommandSpec | None:
    """The spec the file asks for (None, with the problem in ``issues``, out of bounds)."""
    try:
        return CommandSpec(command=command, environment=tuple(entries),
                           working_directory=task.working_directory, timeout_ms=task.timeout_ms,
                           retry=task.retry, idempotent=task.idempotent,
                           concurrency=task.concurrency, requires=task.requires,
                           limits=task.limits, parameters=task.parameters)
    except InvalidInput as exc:
        key = spec_key(exc.field)
        issues.add(task.at(key), task.field_name(key), exc.rule)
        return None


def pulls(view: TaskView | None) -> bool:
    """Whether a stored task is a subscription's pull task or a project's dependency
    install task: `ql repo` and `ql deps` keep them, so files neither export nor prune them
    (docs/subscriptions.md, docs/dependencies.md)."""
    return view is not None and isinstance(view.revision.spec.command,
                                           RepoPullCommand | DepsInstallCommand)
