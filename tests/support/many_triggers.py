"""Many triggers at once, through the product: a project, a task and ``count`` yearly cron
triggers published in one unit of work (one transaction: seconds, not the minutes a publish
per request would take). For the dashboard's browser test and its benchmark."""

from __future__ import annotations

from qinglong.clock import SystemClock
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.open import open_database

YEARLY = "0 0 1 1 *"


def trigger_name(n: int) -> str:
    return f"t{n:04d}"


def seed_triggers(url: str, project: str, count: int, *, task: str = "noop") -> list[str]:
    """Create ``project`` with the task ``task`` (`true`) and triggers t0000, t0001, ... that
    fire once a year; returns their ids."""
    stores = open_database(url, clock=SystemClock())
    names = [trigger_name(n) for n in range(count)]
    try:
        def work() -> None:
            d = stores.definitions
            d.project_create(ProjectCreateParams(project_id=project))
            d.task_publish(TaskPublishParams(
                project_id=project, task_id=task, name=task,
                spec=CommandSpec(command=ShellCommand(command="true"))))
            for name in names:
                d.trigger_publish(TriggerPublishParams(
                    project_id=project, trigger_id=name, task_id=task, expression=YEARLY,
                    timezone="UTC"))

        stores.db.unit(f"seed {count} triggers", work)
    finally:
        stores.close()
    return names
