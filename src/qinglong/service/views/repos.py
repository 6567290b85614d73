"""The view of a Git subscription: what it pulls, its pull task, and what its last pull did
(docs/subscriptions.md)."""

from __future__ import annotations

from typing import Any

from qinglong.domain.repos import Repo, pull_task_id
from qinglong.service.views.base import Instant, OptionalInstant, ViewModel, instant


class RepoView(ViewModel):
    project: str
    name: str
    url: str
    branch: str
    include: list[str]
    exclude: list[str]
    auto_tasks: bool
    timezone: str
    token_env: str | None
    ssh_key_env: str | None
    pull_task: str
    created_by: str
    created_at: Instant
    removed_at: OptionalInstant = None
    last_commit: str | None = None
    last_pull_at: OptionalInstant = None
    last_report: dict[str, Any] | None = None


class RepoPullView(ViewModel):
    project: str
    name: str
    run: str  # the Run of the pull task that pulls


def repo_view(item: Repo) -> RepoView:
    spec = item.spec
    return RepoView(project=item.project_id, name=item.name, url=spec.url, branch=spec.branch,
                    include=list(spec.include), exclude=list(spec.exclude),
                    auto_tasks=spec.auto_tasks, timezone=spec.timezone,
                    token_env=spec.token_env, ssh_key_env=spec.ssh_key_env,
                    pull_task=pull_task_id(item.name), created_by=item.created_by,
                    created_at=instant(item.created_at_ms),
                    removed_at=None if item.removed_at_ms is None
                    else instant(item.removed_at_ms),
                    last_commit=item.last_commit,
                    last_pull_at=None if item.last_pull_at_ms is None
                    else instant(item.last_pull_at_ms),
                    last_report=item.last_report)
