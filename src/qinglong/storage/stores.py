"""Every store of one database, each written once over its kernel ``Database``."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from qinglong.ids import new_uuid
from qinglong.storage.accounts import AccountStore
from qinglong.storage.admission import RequestAdmissions, ScheduleStore
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.deps import DepStore
from qinglong.storage.flows.start import start_occurrence
from qinglong.storage.instances import InstanceStore
from qinglong.storage.kernel import Capabilities, Database, Tx
from qinglong.storage.notify import NotifyStore
from qinglong.storage.oidc import OidcStore
from qinglong.storage.repos import RepoStore
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.flow_store import FlowStore
from qinglong.storage.runs.logs import LogStore
from qinglong.storage.scripts import ScriptStore


@dataclass(slots=True, kw_only=True)
class Stores:
    db: Database
    actor_id: str  # who the lifecycle events of this process are recorded as
    new_id: Callable[[], str] = new_uuid
    definitions: DefinitionStore = field(init=False)
    runs: RunStore = field(init=False)
    schedules: ScheduleStore = field(init=False)
    admissions: RequestAdmissions = field(init=False)
    flows: FlowStore = field(init=False)
    notify: NotifyStore = field(init=False)
    accounts: AccountStore = field(init=False)
    instances: InstanceStore = field(init=False)
    scripts: ScriptStore = field(init=False)
    repos: RepoStore = field(init=False)
    deps: DepStore = field(init=False)
    oidc: OidcStore = field(init=False)  # single sign-on (0026_oidc)
    logs: LogStore | None = field(init=False)  # output kept in the database, where it is

    def __post_init__(self) -> None:
        self.definitions = DefinitionStore(self.db)
        self.runs = RunStore(self.db, actor_id=self.actor_id, new_id=self.new_id)
        self.schedules = ScheduleStore(self.db, actor_id=self.actor_id,
                                       start_flow=start_occurrence)
        self.admissions = RequestAdmissions(self.db, new_id=self.new_id)
        self.flows = FlowStore(self.db, self.admissions, actor_id=self.actor_id,
                               new_id=self.new_id)
        self.notify = NotifyStore(self.db, new_id=self.new_id)
        self.accounts = AccountStore(self.db, new_id=self.new_id)
        self.instances = InstanceStore(self.db)
        self.scripts = ScriptStore(self.db)
        self.repos = RepoStore(self.db)
        self.deps = DepStore(self.db)
        self.oidc = OidcStore(self.db)
        self.logs = LogStore(self.db) if self.db.capabilities.logs_in_database else None

    @property
    def capabilities(self) -> Capabilities:
        return self.db.capabilities

    def transaction(self, action: str) -> AbstractContextManager[Tx]:
        """A unit of work every store call of this thread joins (kernel.Database)."""
        return self.db.transaction(action)

    def close(self) -> None:
        self.db.close()
