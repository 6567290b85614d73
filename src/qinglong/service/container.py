"""Every use case over one database: what the CLI, the HTTP API and the panel call.

``Services`` is built from the stores of one database (profiles/open.py opens it); a surface
never reaches past it into storage.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TypeVar

from qinglong.clock import Clock
from qinglong.domain.task import ExecutorType
from qinglong.service.accounts import Accounts, SessionPolicy
from qinglong.service.backfill import Backfills
from qinglong.service.catalog import Catalog
from qinglong.service.dashboard import TriggerSummaries
from qinglong.service.declarative import Declarative
from qinglong.service.deps import Deps
from qinglong.service.flows import Flows
from qinglong.service.grants import Grants
from qinglong.service.labels import Labels
from qinglong.service.ledger import TriggerLedger
from qinglong.service.manual import ManualRuns
from qinglong.service.notifications import Notifications
from qinglong.service.pins import Pins
from qinglong.service.processes import Processes
from qinglong.service.queue import QueueView, queue_view
from qinglong.service.repos import Repos
from qinglong.service.run_pages import RunPages
from qinglong.service.runs import RunViews
from qinglong.service.scripts import Scripts
from qinglong.service.second_factor import SecondFactorPolicy, SecondFactors
from qinglong.service.stats import TaskStats
from qinglong.storage.dashboard import DashboardStore
from qinglong.storage.kernel import Capabilities, Tx
from qinglong.storage.labels import LabelStore
from qinglong.storage.pins import PinStore
from qinglong.storage.stores import Stores

T = TypeVar("T")


@dataclass(slots=True, kw_only=True)
class Services:
    stores: Stores
    clock: Clock
    session_policy: SessionPolicy | None = None
    second_factor_policy: SecondFactorPolicy | None = None  # who must have one (ql web)
    catalog: Catalog = field(init=False)
    runs: RunViews = field(init=False)
    manual: ManualRuns = field(init=False)
    backfills: Backfills = field(init=False)
    ledger: TriggerLedger = field(init=False)
    pages: RunPages = field(init=False)
    stats: TaskStats = field(init=False)
    summaries: TriggerSummaries = field(init=False)
    accounts: Accounts = field(init=False)
    grants: Grants = field(init=False)
    second_factor: SecondFactors = field(init=False)
    declarative: Declarative = field(init=False)
    processes: Processes = field(init=False)
    notifications: Notifications = field(init=False)
    flows: Flows = field(init=False)
    scripts: Scripts = field(init=False)
    repos: Repos = field(init=False)
    deps: Deps = field(init=False)
    labels: Labels = field(init=False)
    pins: Pins = field(init=False)

    def __post_init__(self) -> None:
        stores = self.stores
        self.catalog = Catalog(stores.definitions, self.clock, stores.scripts,
                               LabelStore(stores.db))
        self.processes = Processes(stores.instances)
        self.runs = RunViews(stores.runs, logs=stores.logs,
                             offers=self.processes.offers)
        self.manual = ManualRuns(stores.admissions, stores.runs)
        self.backfills = Backfills(stores.admissions, self.clock)
        self.ledger = TriggerLedger(stores.runs)
        self.pages = RunPages(stores.runs)
        self.stats = TaskStats(stores.runs)
        self.summaries = TriggerSummaries(DashboardStore(stores.db), self.clock,
                                          LabelStore(stores.db))
        self.labels = Labels(LabelStore(stores.db))
        self.pins = Pins(PinStore(stores.db))
        self.second_factor = SecondFactors(stores.accounts, self.clock,
                                           policy=self.second_factor_policy)
        self.grants = Grants(stores.accounts)
        self.accounts = Accounts(stores.accounts, policy=self.session_policy,
                                 second_factor=self.second_factor)
        self.declarative = Declarative(stores.definitions, stores.db.unit, stores.flows,
                                       pin_script=self.catalog.pinned_script)
        self.notifications = Notifications(stores.notify, self.clock, new_id=stores.new_id)
        self.flows = Flows(stores.flows)
        self.scripts = Scripts(stores.scripts, self.catalog, stores.db)
        self.repos = Repos(stores.repos, self.scripts, self.catalog, stores.db,
                           lambda request: self.manual.admit(request).id)
        self.deps = Deps(stores.deps, self.catalog, stores.db,
                         lambda request: self.manual.admit(request).id)

    def queue(self) -> QueueView:
        """The queue and its Runs by required labels (GET /api/v1/queue)."""
        return queue_view(self.stores.runs)

    @property
    def capabilities(self) -> Capabilities:
        return self.stores.capabilities

    @property
    def commands_run_here(self) -> bool:
        """Whether this database's Runs execute on this host (a local executor), so a
        working directory can be checked where it is published."""
        return self.capabilities.executor_type is ExecutorType.LOCAL_PROCESS

    @property
    def profile(self) -> str:
        """Which kind of database this is ("sqlite", "postgresql"), for the health view."""
        return self.capabilities.name

    def ping(self) -> None:
        """One round trip to the database (readiness)."""
        self.stores.db.read("check the database", lambda tx: tx.one("ping"))

    def runs_for(self, actor: str) -> RunViews:
        """Run views whose cancels are recorded as ``actor``."""
        return self.runs.acting_as(actor)

    def unit(self, action: str, work: Callable[[], T]) -> T:
        """Run ``work`` as one unit of work: every use case it calls commits together, or
        none does (a conflict runs it again)."""
        return self.stores.db.unit(action, work)

    def transaction(self, action: str) -> AbstractContextManager[Tx]:
        """A unit of work: every use case called in it commits together (or not at all)."""
        return self.stores.transaction(action)

    def close(self) -> None:
        self.stores.close()
