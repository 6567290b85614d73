"""Project dependency sets as the surfaces ask for them (docs/dependencies.md).

A change appends a revision of the project's set (``ql deps add`` / ``rm``) and, the first
time, publishes the project's install task (kind ``deps``, id ``deps-install``). ``ql deps
install`` admits a Run of that task: the executor that runs it installs the set current when
the Attempt starts into its own cache, keyed by the set's digest, with the install's output
as the Run's log. A script Run of the project uses that environment, and builds it first (in
its own Run, under the same lock) where this worker has not yet.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from qinglong.domain.deps import INSTALL_TASK, DepSet, DepsRevision
from qinglong.domain.manual import ManualRequest
from qinglong.domain.publishing import TaskPatch
from qinglong.domain.task import DepsInstallCommand
from qinglong.errors import InvalidInput, NotFound
from qinglong.service.catalog import Catalog, TaskPublishRequest
from qinglong.storage.deps import DepStore
from qinglong.storage.kernel import Database

INSTALL_TIMEOUT_MS = 30 * 60_000


class Deps:
    def __init__(self, store: DepStore, catalog: Catalog, db: Database,
                 admit: Callable[[ManualRequest], str]) -> None:
        self._store = store
        self._catalog = catalog
        self._db = db
        self._admit = admit

    def add(self, project_id: str, python: Sequence[str], node: Sequence[str],
            actor: str) -> tuple[DepsRevision, bool]:
        """Add (or change the specifier of) packages; the current revision and whether this
        change made it (the same set again records nothing)."""
        if not python and not node:
            raise InvalidInput("deps", "name at least one package (--python or --node)")
        DepSet.of(python, node)  # every specifier checked before anything is read

        def work() -> tuple[DepsRevision, bool]:
            found = self._store.change(project_id, lambda now: now.adding(python, node), actor)
            self._install_task(project_id)
            return found

        return self._db.unit("add dependencies", work)

    def remove(self, project_id: str, python: Sequence[str], node: Sequence[str],
               actor: str) -> tuple[DepsRevision, bool]:
        """Remove packages (by name); InvalidInput for one the set does not have."""
        if not python and not node:
            raise InvalidInput("deps", "name at least one package (--python or --node)")
        if self._store.show(project_id) is None:
            raise NotFound("dependency set", project_id)
        return self._store.change(project_id, lambda now: now.removing(python, node), actor)

    def show(self, project_id: str) -> DepsRevision | None:
        return self._store.show(project_id)

    def history(self, project_id: str, limit: int = 50) -> list[DepsRevision]:
        return self._store.history(project_id, limit)

    def install(self, project_id: str, actor: str, request_id: str) -> str:
        """Admit a Run of the project's install task now; its id."""
        try:
            self._catalog.task_spec(project_id, INSTALL_TASK)
        except NotFound:
            raise NotFound("dependency set", project_id) from None
        return self._admit(ManualRequest(project_id=project_id, task_id=INSTALL_TASK,
                                         request_id=request_id, actor=actor))

    def _install_task(self, project_id: str) -> None:
        """The project's install task, published once (an operator may change its timeout,
        requirements or schedule like any task's; a deleted one comes back)."""
        try:
            spec = self._catalog.task_spec(project_id, INSTALL_TASK)
        except NotFound:
            spec = None
        if spec is not None and isinstance(spec.command, DepsInstallCommand):
            return
        self._catalog.task_publish(TaskPublishRequest(
            project_id=project_id, task_id=INSTALL_TASK, name="install dependencies",
            enabled=True, patch=TaskPatch(command=DepsInstallCommand(),
                                          timeout_ms=INSTALL_TIMEOUT_MS, concurrency=1)))
