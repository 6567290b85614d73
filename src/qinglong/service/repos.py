"""Git subscriptions as the surfaces ask for them (docs/subscriptions.md).

Adding a subscription publishes its pull task (kind ``repo``) and, with a schedule, the
trigger that runs it. A pull is a Run of that task: the executor starts ``ql repo
import-run``, which clones the branch, reads the scripts the globs select and imports them
in **one transaction** -- new and changed files as script revisions (the tasks that run them
move along), files gone from the branch removed -- and, with auto-tasks, creates, updates and
disables the tasks and triggers their header lines ask for. A file that cannot be imported
(binary, too large, a bad path or a bad cron line) is reported and the rest imported. A pull
that finds nothing new writes nothing. A Run's history is never deleted: a task whose script
is gone is disabled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

from qinglong.domain.cron import CronSchedule
from qinglong.domain.manual import ManualRequest
from qinglong.domain.publishing import TaskPatch
from qinglong.domain.repos import (
    PULL_LABEL,
    PullReport,
    Repo,
    RepoSpec,
    check_repo_name,
    pull_task_id,
    read_header,
    task_id_for,
)
from qinglong.domain.scripts import ScriptRef, check_content, check_path, digest_of
from qinglong.domain.task import ExecutorType, RepoPullCommand, ScriptCommand
from qinglong.errors import Conflict, InvalidInput, NotFound
from qinglong.service import git_fetch
from qinglong.service.catalog import Catalog, TaskPublishRequest
from qinglong.service.scripts import Scripts
from qinglong.service.units import as_one_unit
from qinglong.storage.definitions.params import TriggerPublishParams
from qinglong.storage.kernel import Database
from qinglong.storage.repos import RepoStore

T = TypeVar("T")
PULL_TIMEOUT_MS = 15 * 60_000
Say = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class Fetched:
    commit: str
    files: Mapping[str, bytes]  # project path -> content (importable)
    seen: frozenset[str]  # every project path the globs selected (importable or not)
    problems: tuple[tuple[str, str], ...]


class Repos:
    def __init__(self, store: RepoStore, scripts: Scripts, catalog: Catalog, db: Database,
                 admit: Callable[[ManualRequest], str]) -> None:
        self._store = store
        self._scripts = scripts
        self._catalog = catalog
        self._db = db
        self._admit = admit

    def _unit(self, action: str, work: Callable[[], T]) -> T:
        return as_one_unit(self._db, action, work)

    # -- the subscription ---------------------------------------------------------------

    def add(self, project_id: str, name: str, spec: RepoSpec, actor: str, *,
            cron: str | None, timezone: str = "UTC") -> Repo:
        """Add a subscription, its pull task and (with ``cron``) the trigger that pulls."""
        check_repo_name(name)
        if cron is not None:
            CronSchedule.parse(cron, timezone)

        def work() -> Repo:
            repo, _ = self._store.put(project_id, name, spec, actor, create=True)
            task = pull_task_id(name)
            try:
                taken = self._catalog.task_spec(project_id, task).command
            except NotFound:
                taken = RepoPullCommand(repo=name)
            if taken != RepoPullCommand(repo=name):
                raise Conflict(f"task {task!r} exists and runs something else: the pull task "
                               "of this subscription needs its id (choose another name)")
            cluster = self._db.capabilities.executor_type is ExecutorType.REMOTE_WORKER
            self._catalog.task_publish(TaskPublishRequest(
                project_id=project_id, task_id=task, name=f"pull {name}", enabled=True,
                patch=TaskPatch(command=RepoPullCommand(repo=name), timeout_ms=PULL_TIMEOUT_MS,
                                concurrency=1,
                                requires=(PULL_LABEL,) if cluster else ())))
            if cron is not None:
                self._catalog.trigger_publish(TriggerPublishParams(
                    project_id=project_id, trigger_id=task, task_id=task, expression=cron,
                    timezone=timezone, misfire_policy="skip"))
            return repo

        return self._unit("add a subscription", work)

    def listing(self, project_id: str, removed: bool = False) -> list[Repo]:
        return self._store.listing(project_id, removed)

    def get(self, project_id: str, name: str) -> Repo:
        return self._store.get(project_id, name)

    def remove(self, project_id: str, name: str) -> Repo:
        """End a subscription: its pull task and trigger are disabled; the scripts and tasks
        it imported stay (their Runs' history with them)."""
        def work() -> Repo:
            repo = self._store.remove(project_id, name)
            task = pull_task_id(name)
            for view in self._catalog.trigger_list(project_id, trigger_id=task):
                if view.enabled:
                    self._catalog.trigger_publish(TriggerPublishParams(
                        project_id=project_id, trigger_id=task, enabled=False))
            self._catalog.task_set_enabled(project_id, task, False)
            return repo

        return self._unit("remove a subscription", work)

    def pull(self, project_id: str, name: str, actor: str, request_id: str) -> str:
        """Admit a Run of the pull task now (its log and outcome are the pull's); its id."""
        self._store.get(project_id, name)
        return self._admit(ManualRequest(project_id=project_id, task_id=pull_task_id(name),
                                         request_id=request_id, actor=actor))

    # -- a pull -------------------------------------------------------------------------

    def fetch(self, project_id: str, name: str, spec: RepoSpec, environ: Mapping[str, str],
              say: Say) -> Fetched:
        """The branch's scripts as the subscription selects them (nothing is written)."""
        files: dict[str, bytes] = {}
        seen: set[str] = set()
        problems: list[tuple[str, str]] = []
        with git_fetch.checkout(spec, environ, say) as (root, commit):
            for path, content in git_fetch.tracked_files(root, environ, say):
                if not spec.wants(path):
                    continue
                target = f"{name}/{path}"
                seen.add(target)
                if isinstance(content, str):
                    problems.append((path, content))
                    continue
                try:
                    check_path(target)
                    files[target] = check_content(content, path)
                except InvalidInput as exc:
                    problems.append((path, exc.rule))
        say(f"commit {commit}: {len(files)} scripts selected"
            + (f", {len(problems)} not importable" if problems else ""))
        return Fetched(commit=commit, files=files, seen=frozenset(seen),
                       problems=tuple(sorted(problems)))

    def import_run(self, project_id: str, name: str, actor: str, environ: Mapping[str, str],
                   say: Say, *, dry_run: bool = False) -> PullReport:
        """Pull the subscription and import what changed, in one transaction (``dry_run``:
        say what would change and write nothing)."""
        repo = self._store.get(project_id, name)
        fetched = self.fetch(project_id, name, repo.spec, environ, say)

        def work() -> PullReport:
            report = self._import(repo, fetched, actor)
            if not dry_run:
                self._store.pulled(project_id, name, fetched.commit, report.to_json())
            return report

        if dry_run:
            return self._dry(repo, fetched)
        return self._unit("import a pull", work)

    def _dry(self, repo: Repo, fetched: Fetched) -> PullReport:
        current = self._current(repo)
        saved = tuple(p for p, c in sorted(fetched.files.items())
                      if current.get(p) != digest_of(c))
        removed = tuple(sorted(set(current) - fetched.seen))
        return PullReport(commit=fetched.commit, saved=saved, removed=removed,
                          unchanged=len(fetched.files) - len(saved), problems=fetched.problems)

    def _current(self, repo: Repo) -> dict[str, str]:
        return {s.path: s.digest for s in self._scripts.listing(repo.project_id, repo.name)
                if s.digest is not None}

    def _import(self, repo: Repo, fetched: Fetched, actor: str) -> PullReport:
        project, source = repo.project_id, f"repo:{repo.name}@{fetched.commit[:12]}"
        current = self._current(repo)
        saved: list[str] = []
        removed: list[str] = []
        for path, content in sorted(fetched.files.items()):
            if current.get(path) == digest_of(content):
                continue
            self._scripts.put(project, path, content, actor, source=source)
            saved.append(path)
        for path in sorted(set(current) - fetched.seen):
            self._scripts.remove(project, path, actor, source=source)
            removed.append(path)
        report = PullReport(commit=fetched.commit, saved=tuple(saved), removed=tuple(removed),
                            unchanged=len(fetched.files) - len(saved),
                            problems=fetched.problems)
        if not repo.spec.auto_tasks:
            return report
        return self._tasks(repo, fetched, report)

    def _tasks(self, repo: Repo, fetched: Fetched, report: PullReport) -> PullReport:
        """Tasks and triggers as the scripts' header lines ask (auto-tasks)."""
        project, spec = repo.project_id, repo.spec
        created: list[str] = []
        updated: list[str] = []
        disabled: list[str] = []
        problems = list(report.problems)
        wanted: set[str] = set()
        for path, content in sorted(fetched.files.items()):
            header = read_header(content.decode("utf-8"),
                                 lambda cron: _check_cron(cron, spec.timezone))
            inside = path[len(repo.name) + 1:]
            if header.problem is not None:
                problems.append((inside, header.problem))
            if header.cron is None:
                continue
            task = task_id_for(repo.name, inside)
            command = self._command(project, task, path)
            if command is None:
                taken = f"task {task!r} exists and runs something else: it was left as it is"
                problems.append((inside, taken))
                continue
            wanted.add(task)
            view = self._catalog.task_publish(TaskPublishRequest(
                project_id=project, task_id=task, name=(header.name or inside)[:255],
                enabled=True, patch=TaskPatch(command=command)))
            if view.created:
                (created if view.revision == 1 else updated).append(task)
            trigger = self._catalog.trigger_publish(TriggerPublishParams(
                project_id=project, trigger_id=task, task_id=task, expression=header.cron,
                timezone=spec.timezone, misfire_policy="skip", enabled=True))
            if trigger.created and view.revision != 1 and task not in updated:
                updated.append(task)
        for task_id, enabled in self._own_tasks(repo):
            if task_id not in wanted and enabled:
                self._disable(project, task_id)
                disabled.append(task_id)
        return replace(report, problems=tuple(sorted(problems)), tasks_created=tuple(created),
                       tasks_updated=tuple(updated), tasks_disabled=tuple(disabled))

    def _command(self, project: str, task: str, path: str) -> ScriptCommand | None:
        """The task's command: the script pinned to its content now (its interpreter and
        arguments kept when the task runs it already); None when a task of that id exists
        and runs something else (a task auto-tasks did not make is never taken over)."""
        try:
            now = self._catalog.task_spec(project, task)
        except NotFound:
            now = None
        pinned = self._catalog.pinned_script(project, ScriptRef(path=path))
        if now is None:
            return pinned
        if isinstance(now.command, ScriptCommand) and now.command.path == path:
            return replace(now.command, digest=pinned.digest)
        return None

    def _own_tasks(self, repo: Repo) -> list[tuple[str, bool]]:
        """The tasks auto-tasks made for this subscription (a script task under its folder,
        named as auto-tasks names them), and whether each is enabled."""
        found = []
        for task_id, spec, enabled in self._catalog.task_specs(repo.project_id):
            command = spec.command
            if isinstance(command, ScriptCommand) and command.path.startswith(f"{repo.name}/") \
                    and task_id == task_id_for(repo.name, command.path[len(repo.name) + 1:]):
                found.append((task_id, enabled))
        return found

    def _disable(self, project: str, task: str) -> None:
        for view in self._catalog.trigger_list(project, trigger_id=task):
            if view.enabled:
                self._catalog.trigger_publish(TriggerPublishParams(
                    project_id=project, trigger_id=task, enabled=False))
        self._catalog.task_set_enabled(project, task, False)


def _check_cron(cron: str, timezone: str) -> None:
    CronSchedule.parse(cron, timezone)
