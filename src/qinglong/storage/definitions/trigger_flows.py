"""What publishing a trigger that starts a flow checks (docs/controls/flows.md, "Started by a
trigger"): the flow is there, the task the trigger is filed under is one of the flow's, and the
values the trigger gives fit the flow's tasks (as a flow run's would: storage/flows/start.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from qinglong.domain.identifiers import entity_id
from qinglong.domain.parameters import Parameter
from qinglong.errors import InvalidInput, NotFound
from qinglong.storage.flows.publish import check_values, current_task
from qinglong.storage.flows.start import current_revision
from qinglong.storage.kernel import Tx


def flow_task(tx: Tx, project_id: str, flow_id: str, task_id: str | None) -> str:
    """The task a new trigger of ``flow_id`` is filed under: ``task_id`` (which must be one of
    the flow's tasks) or, when none is given, the task of the flow's first root node."""
    revision = current_revision(tx, project_id, flow_id)
    tasks = {node.task_id for node in revision.spec.nodes}
    if task_id is None:
        return next(node.task_id for node in revision.spec.nodes if not node.after)
    entity_id(task_id, "task")
    if task_id not in tasks:
        raise InvalidInput("task", f"{task_id!r} is not a task of flow {flow_id} (its tasks: "
                                   f"{', '.join(sorted(tasks))}); leave --task out to file the "
                                   "trigger under the flow's first root")
    return task_id


def check_flow_values(tx: Tx, project_id: str, flow_id: str,
                      values: Mapping[str, object]) -> None:
    """The values a flow trigger gives must fit its flow's tasks as they are now."""
    revision = current_revision(tx, project_id, flow_id)
    declared: dict[str, tuple[Parameter, ...]] = {}
    for task_id in revision.pins:
        task = current_task(tx, project_id, task_id)
        if task is None:
            raise NotFound("task", f"{project_id}/{task_id} (of flow {flow_id})")
        declared[task_id] = task.spec.parameters
    check_values(revision, values, declared)
