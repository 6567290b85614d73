"""The storage contract: one suite, every store written once over the storage kernel, on
every database.

Every case that takes ``backend`` runs once on SQLite and once per PostgreSQL server of the
harness in tests/support/pg.py (embedded PostgreSQL 18 always, the system server on
127.0.0.1:5432 when it answers). A missing embedded server is an error, never a skip.

A ``Backend`` holds the stores under test (on PostgreSQL: definitions as ``ql_admin``, run
reads as ``ql_runtime``), the kernel of its database as any role (``database``), and test
hooks, each implemented per dialect: reading the clock the store stamps rows with, letting
it pass, and tampering with stored rows as the database owner. Runs are admitted through the
one scheduling algorithm (``run_cycle``: the Coordinator over the ScheduleStore). A case that
must behave differently asks ``backend.capabilities`` for the difference, never the dialect's
name; a case that needs several processes serving the database at once (row locks, another
replica's claims, a lost COMMIT reply) takes ``pg_backend`` instead.
"""

from __future__ import annotations

import abc
import contextlib
import itertools
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from qinglong.clock import Clock, SystemClock
from qinglong.domain.decision import Decision
from qinglong.domain.schedule import ScheduleClaim
from qinglong.scheduler.coordinator import Coordinator
from qinglong.scheduler.report import CycleReport
from qinglong.service.container import Services
from qinglong.storage.admission import ScheduleStore
from qinglong.storage.admission.params import CommitOutcome, CommitResult
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.definitions.params import ProjectCreateParams
from qinglong.storage.flows.start import start_occurrence
from qinglong.storage.kernel import Capabilities, Database
from qinglong.storage.open import Role, open_database
from qinglong.storage.postgres.connection import SessionSettings, SingleConnector
from qinglong.storage.postgres.driver import open_postgres
from qinglong.storage.postgres.migrate import migrate
from qinglong.storage.postgres.roles import provision_roles
from qinglong.storage.postgres.web_pool import WebPool
from qinglong.storage.runs import RunStore
from qinglong.storage.stores import Stores
from qinglong.testing import FakeClock
from testkit.postgres import EmbeddedPostgres
from tests.conftest import SqliteStores
from tests.support.pg import (
    EMBEDDED,
    SERVERS,
    SYSTEM,
    SYSTEM_PORT,
    PgServer,
    PgTestDatabase,
    create_database,
    drop_database,
)

BACKENDS = ["sqlite", *(f"pg:{server}" for server in SERVERS)]
SCHEDULER_OWNER = "contract"
_DATABASES = itertools.count(1)

CommittedHook = Callable[[object, Decision, CommitResult], None]


class Backend(abc.ABC):
    """The stores under test plus the per-dialect hooks the contract cases need."""

    name: str  # the pytest id: "sqlite", "pg:pg18-embedded", "pg:pg-system"
    definitions: DefinitionStore
    runs: RunStore
    lifecycle: RunStore
    schedules: ScheduleStore
    kernel: Database  # the kernel the scheduler's store is written over

    @property
    def capabilities(self) -> Capabilities:
        """What the database under test can do (the kernel's named flags)."""
        return self.kernel.capabilities

    @property
    def executor_type(self) -> str:
        """What an admission's first Attempt is for on this database."""
        return self.capabilities.executor_type.value

    @abc.abstractmethod
    def clock(self) -> Clock:
        """The clock to hand a service or a URL opener (the store's own clock on SQLite;
        PostgreSQL stamps rows with the database clock whatever a process's clock says)."""

    @abc.abstractmethod
    def url(self, role: str = "ql_runtime") -> str:
        """The database URL, as ``role`` where the database has roles."""

    @abc.abstractmethod
    def sql(self, statement: str, *params: object) -> list[dict[str, Any]]:
        """Run one statement as the database owner (test-only): ``?`` placeholders on every
        dialect; the rows it returns (none for a statement without a result)."""

    # -- the clock ----------------------------------------------------------------------

    @abc.abstractmethod
    def now_ms(self) -> int:
        """One reading of the clock this adapter stamps rows with."""

    @abc.abstractmethod
    def let_time_pass(self) -> None:
        """Move that clock forward by at least a few milliseconds."""

    @abc.abstractmethod
    def pass_time(self, ms: int) -> None:
        """Let ``ms`` pass on that clock (SQLite: the fake clock; PostgreSQL: real time)."""

    @abc.abstractmethod
    def age_sessions(self, ms: int) -> None:
        """As if ``ms`` passed for every browser session, exactly: SQLite's fake clock moves
        on; on PostgreSQL, whose clock is real, every instant a session holds moves back by
        ``ms`` (a wait could not be exact on a busy machine)."""

    # -- tampering (as the database owner; test-only) -------------------------------------

    @abc.abstractmethod
    def tamper_trigger_spec(self, old: str, new: str, trigger_id: str | None = None) -> int:
        """Replace ``old`` by ``new`` in the stored JSON of every trigger revision holding it
        (of ``trigger_id`` only, when given).

        Digests are left alone, so readers must refuse the rows. Returns the rows changed.
        """

    @abc.abstractmethod
    def drop_claims(self) -> None:
        """Let go of every claim a schedule row holds, as if each had expired (a database
        whose claims write nothing holds none)."""

    @abc.abstractmethod
    def refuse_writes(self, table: str, event: str = "INSERT", when: str | None = None) -> None:
        """From now on the database refuses every ``event`` on ``table`` (of the rows
        ``when`` holds for: a condition on ``NEW``) as a constraint would (test-only)."""

    @abc.abstractmethod
    def rename_task_revision(self, name: str) -> int:
        """Overwrite the name of every stored task revision (digests left alone)."""

    @abc.abstractmethod
    def force_run_status(self, run_id: str, status: str) -> None:
        """Set one Run's status column directly (for filter cases)."""

    @abc.abstractmethod
    def set_cursor(self, project_id: str, trigger_id: str, at_ms: int) -> None:
        """Put a trigger's durable cursor at ``at_ms`` (and bump its state version)."""

    @abc.abstractmethod
    def tamper_execution_plan(self, old: str, new: str) -> int:
        """Replace text in every stored execution plan (digests left alone)."""

    @abc.abstractmethod
    def age_leases(self, ms: int) -> None:
        """Make every lease ``ms`` older in the clock the adapter judges expiry by."""

    @abc.abstractmethod
    def age_retries(self, ms: int) -> None:
        """Make every retry wait ``ms`` shorter in the adapter's clock."""

    @abc.abstractmethod
    def set_global_limit(self, max_running: int | None) -> None:
        """Set (or clear) the cluster-wide limit of Runs in progress."""

    @abc.abstractmethod
    def request_cancel(self, run_id: str) -> None:
        """Mark a Run as asked to be cancelled (the cancel verb comes with the workers)."""

    @abc.abstractmethod
    def database(self, role: str, application_name: str, *,
                 settings: SessionSettings | None = None, pool: bool = False) -> Database:
        """The kernel this backend's stores are written over, as ``role`` (PostgreSQL: a
        connection of its own, closed with the backend, whose sessions take ``settings``, the
        timeouts of a replica's or a worker's sessions, when given; with ``pool``, a pool of
        connections as `ql web` opens it; SQLite: the one file)."""

    def schedule_store(self, name: str = SCHEDULER_OWNER, **options: Any) -> ScheduleStore:
        """A ScheduleStore as a replica opens it (``ql_runtime``, its session timeouts),
        recording as ``name``; ``options`` go to the store (deadlines, seams)."""
        options.setdefault("start_flow", start_occurrence)
        return ScheduleStore(self.database("ql_runtime", name, settings=SessionSettings()),
                             actor_id=name, **options)

    # -- admission through the scheduler -------------------------------------------------

    def run_cycle(self, new_id: Callable[[], str], on_committed: CommittedHook) -> CycleReport:
        """One scheduler cycle of the coordinator over this database's schedule store."""
        hook: Callable[[ScheduleClaim, Decision, CommitResult], None] = on_committed
        return Coordinator(self.schedules, owner=SCHEDULER_OWNER, new_id=new_id,
                           on_committed=hook, wake_hint=False).run_cycle()

    def admit(self, project_id: str, trigger_id: str, at_ms: int, *, run_id: str | None = None) -> str:
        """Make one trigger due at ``at_ms`` and admit that occurrence; returns the Run id.

        ``at_ms`` must lie at or before ``now_ms()`` and within the 30 s grace, so the
        occurrence is decided on time. Every other id is a fresh UUID.
        """
        self.set_cursor(project_id, trigger_id, at_ms)
        wanted = iter([run_id] if run_id is not None else [])
        results: list[CommitResult] = []

        def new_id() -> str:
            return next(wanted, None) or str(uuid.uuid4())

        report = self.run_cycle(new_id, lambda _item, _decision, result: results.append(result))
        admitted = [r for r in results if r.outcome is CommitOutcome.ADMITTED]
        assert report.admitted == 1 and len(admitted) == 1, (report, results)
        assert admitted[0].run_id is not None
        if run_id is not None:
            assert admitted[0].run_id == run_id
        return admitted[0].run_id


# --- SQLite ----------------------------------------------------------------------------


@dataclass(eq=False)
class SqliteBackend(Backend):
    stores: SqliteStores
    fake_clock: FakeClock
    name: str = "sqlite"

    def __post_init__(self) -> None:
        self.definitions = self.stores.definitions
        self.runs = self.stores.runs
        self.lifecycle = self.stores.runs
        self.kernel = self.stores.database
        self.schedules = ScheduleStore(self.kernel, actor_id=SCHEDULER_OWNER,
                                       start_flow=start_occurrence)

    def database(self, role: str, application_name: str, *,
                 settings: SessionSettings | None = None, pool: bool = False) -> Database:
        return self.stores.database

    def clock(self) -> Clock:
        return self.fake_clock

    def url(self, role: str = "ql_runtime") -> str:
        return f"sqlite:///{self.stores.path}"

    def sql(self, statement: str, *params: object) -> list[dict[str, Any]]:
        cursor = self.stores.db.connection().execute(statement, params)
        return [dict(row) for row in cursor.fetchall()] if cursor.description else []

    def _execute(self, statement: str, params: tuple[object, ...] = ()) -> int:
        return self.stores.db.connection().execute(statement, params).rowcount

    def now_ms(self) -> int:
        return self.fake_clock.now_ms()

    def let_time_pass(self) -> None:
        self.fake_clock.advance(1_000)

    def pass_time(self, ms: int) -> None:
        self.fake_clock.advance(ms)

    def age_sessions(self, ms: int) -> None:
        self.fake_clock.advance(ms)

    def tamper_trigger_spec(self, old: str, new: str, trigger_id: str | None = None) -> int:
        return self._execute(
            "UPDATE trigger_revisions SET spec_json = replace(spec_json, ?, ?) "
            "WHERE instr(spec_json, ?) > 0 AND trigger_id = coalesce(?, trigger_id)",
            (old, new, old, trigger_id))

    def drop_claims(self) -> None:
        return None  # a claim writes nothing on a database one process serves

    def refuse_writes(self, table: str, event: str = "INSERT", when: str | None = None) -> None:
        condition = f"WHEN {when} " if when else ""
        self._execute(f"CREATE TRIGGER refuse_{table} BEFORE {event} ON {table} {condition}"
                      "BEGIN SELECT RAISE(ABORT, 'injected'); END")

    def rename_task_revision(self, name: str) -> int:
        return self._execute("UPDATE task_definition_revisions SET name = ?", (name,))

    def force_run_status(self, run_id: str, status: str) -> None:
        assert self._execute("UPDATE runs SET status = ? WHERE id = ?", (status, run_id)) == 1

    def tamper_execution_plan(self, old: str, new: str) -> int:
        return self._execute("UPDATE task_execution_revisions SET plan_json = replace(plan_json, "
                             "?, ?) WHERE instr(plan_json, ?) > 0", (old, new, old))

    def age_leases(self, ms: int) -> None:
        self.fake_clock.advance(ms)

    def request_cancel(self, run_id: str) -> None:
        assert self._execute("UPDATE runs SET cancel_requested_at_ms = 1 WHERE id = ?",
                             (run_id,)) == 1

    def age_retries(self, ms: int) -> None:
        self.fake_clock.advance(ms)

    def set_global_limit(self, max_running: int | None) -> None:
        self._execute("DELETE FROM concurrency_limits")
        if max_running is not None:
            self._execute("INSERT INTO concurrency_limits VALUES ('global', ?, 0)", (max_running,))

    def set_cursor(self, project_id: str, trigger_id: str, at_ms: int) -> None:
        changed = self._execute(
            "UPDATE trigger_schedules SET next_fire_at_ms = ?, state_version = state_version + 1 "
            "WHERE project_id = ? AND trigger_id = ?", (at_ms, project_id, trigger_id))
        assert changed == 1



# --- PostgreSQL ------------------------------------------------------------------------


@dataclass(eq=False)
class PgBackend(Backend):
    db: PgTestDatabase
    name: str
    _connectors: list[SingleConnector | WebPool] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.definitions = DefinitionStore(self.database("ql_admin", "contract-admin"))
        self.runs = RunStore(self.database("ql_runtime", "contract-reader"), actor_id="cluster")
        self.lifecycle = RunStore(self.database("ql_runtime", "contract-lifecycle"),
                                  actor_id="contract")
        self.kernel = self.database("ql_runtime", SCHEDULER_OWNER, settings=SessionSettings())
        self.schedules = ScheduleStore(self.kernel, actor_id=SCHEDULER_OWNER,
                                       start_flow=start_occurrence)

    def database(self, role: str, application_name: str, *,
                 settings: SessionSettings | None = None, pool: bool = False) -> Database:
        """The kernel over one connection as ``role``, or a pool (closed with the backend)."""
        if pool:
            web = WebPool(self.db.url(role), application_name=application_name)
            self._connectors.append(web)
            web.open()
            return open_postgres(web)
        connector = SingleConnector(self.db.url(role), application_name=application_name,
                                    settings=settings)
        self._connectors.append(connector)
        return open_postgres(connector, index_scans_only=settings is not None)

    def clock(self) -> Clock:
        return SystemClock()

    def url(self, role: str = "ql_runtime") -> str:
        return self.db.url(role)

    def sql(self, statement: str, *params: object) -> list[dict[str, Any]]:
        if not params:
            return self.db.execute(statement)
        return self.db.execute(statement.replace("?", "%s"), list(params))

    def close(self) -> None:
        for connector in self._connectors:
            connector.close()

    def now_ms(self) -> int:
        [row] = self.db.execute(
            "SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint AS now_ms")
        return int(row["now_ms"])  # type: ignore[call-overload]

    def let_time_pass(self) -> None:
        start = self.now_ms()
        while self.now_ms() < start + 5:
            time.sleep(0.002)

    def pass_time(self, ms: int) -> None:
        until = self.now_ms() + ms
        while (left := until - self.now_ms()) > 0:
            time.sleep(left / 1000)

    def age_sessions(self, ms: int) -> None:
        self.db.execute(
            "UPDATE user_sessions SET created_at_ms = created_at_ms - %s, "
            "expires_at_ms = expires_at_ms - %s, idle_expires_at_ms = idle_expires_at_ms - %s, "
            "seen_at_ms = seen_at_ms - %s, ended_at_ms = ended_at_ms - %s", [ms] * 5)

    def tamper_trigger_spec(self, old: str, new: str, trigger_id: str | None = None) -> int:
        rows = self.db.execute(
            "UPDATE trigger_revisions SET spec_json = replace(spec_json::text, %s, %s)::jsonb "
            "WHERE strpos(spec_json::text, %s) > 0 AND trigger_id = coalesce(%s, trigger_id) "
            "RETURNING revision", [old, new, old, trigger_id])
        return len(rows)

    def drop_claims(self) -> None:
        self.db.execute("UPDATE trigger_schedules SET claim_owner = NULL, claim_token = NULL, "
                        "claim_expires_at_ms = NULL WHERE claim_token IS NOT NULL")

    def refuse_writes(self, table: str, event: str = "INSERT", when: str | None = None) -> None:
        self.db.execute(
            f"CREATE FUNCTION qinglong.refuse_{table}() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = 'check_violation'; END $$")
        condition = f"WHEN ({when}) " if when else ""
        self.db.execute(f"CREATE TRIGGER refuse_{table} BEFORE {event} ON {table} FOR EACH ROW "
                        f"{condition}EXECUTE FUNCTION qinglong.refuse_{table}()")

    def rename_task_revision(self, name: str) -> int:
        return len(self.db.execute(
            "UPDATE task_definition_revisions SET name = %s RETURNING revision", [name]))

    def force_run_status(self, run_id: str, status: str) -> None:
        rows = self.db.execute("UPDATE runs SET status = %s WHERE id = %s RETURNING id",
                               [status, run_id])
        assert len(rows) == 1

    def tamper_execution_plan(self, old: str, new: str) -> int:
        return len(self.db.execute(
            "UPDATE task_execution_revisions SET plan_json = replace(plan_json::text, %s, %s)::jsonb "
            "WHERE strpos(plan_json::text, %s) > 0 RETURNING source_revision", [old, new, old]))

    def age_leases(self, ms: int) -> None:
        self.db.execute("UPDATE run_attempts SET lease_expires_at_ms = lease_expires_at_ms - %s "
                        "WHERE lease_expires_at_ms IS NOT NULL", [ms])

    def request_cancel(self, run_id: str) -> None:
        rows = self.db.execute("UPDATE runs SET cancel_requested_at_ms = 1 WHERE id = %s "
                               "RETURNING id", [run_id])
        assert len(rows) == 1

    def age_retries(self, ms: int) -> None:
        self.db.execute("UPDATE runs SET retry_at_ms = retry_at_ms - %s "
                        "WHERE retry_at_ms IS NOT NULL", [ms])

    def set_global_limit(self, max_running: int | None) -> None:
        self.db.execute("DELETE FROM concurrency_limits")
        if max_running is not None:
            self.db.execute("INSERT INTO concurrency_limits VALUES ('global', %s, 0)",
                            [max_running])

    def set_cursor(self, project_id: str, trigger_id: str, at_ms: int) -> None:
        rows = self.db.execute(
            "UPDATE trigger_schedules SET next_fire_at_ms = %s, state_version = state_version + 1 "
            "WHERE project_id = %s AND trigger_id = %s RETURNING trigger_id",
            [at_ms, project_id, trigger_id])
        assert len(rows) == 1



EVERY_5_S = "*/5 * * * * *"


def misfired_cursor(backend: Backend) -> int:
    """A cursor two minutes late for an ``EVERY_5_S`` trigger, read just past an occurrence.

    After the misfire the cursor resumes at the first occurrence still within the grace, and
    the same cycle claims the row again at once. That occurrence stays on time for as long as
    is left to the next occurrence from the first claim's instant, so starting just past an
    occurrence gives the re-claim about 4.5 s (a per-second trigger gave a slow machine a few
    hundred ms, and a second misfire)."""
    phase = backend.now_ms() % 5_000
    backend.pass_time(5_000 - phase + 50 if phase >= 500 else 50)
    return backend.now_ms() // 5_000 * 5_000 - 120_000


# --- fixtures --------------------------------------------------------------------------


@dataclass
class _PgTarget:
    server: PgServer
    template: str


class PgTargets:
    """Per server name: the server and one migrated template database, for the session."""

    def __init__(self) -> None:
        self._targets: dict[str, _PgTarget] = {}

    def get(self, name: str, request: pytest.FixtureRequest) -> _PgTarget:
        if name not in self._targets:
            if name == EMBEDDED:
                # An embedded server that cannot start fails this lookup: an error, not a skip.
                embedded: EmbeddedPostgres = request.getfixturevalue("embedded_pg")
                server = PgServer(EMBEDDED, "127.0.0.1", embedded.port, embedded)
            else:
                assert name == SYSTEM, name
                server = PgServer(SYSTEM, "127.0.0.1", SYSTEM_PORT)
            template = f"qlctpl_{os.getpid()}"
            drop_database(server, template)
            create_database(server, template)
            with server.connect(template) as conn:
                provision_roles(conn)
                migrate(conn)
            self._targets[name] = _PgTarget(server, template)
        return self._targets[name]

    def close(self) -> None:
        for target in self._targets.values():
            if target.server.embedded is None:  # the embedded server is deleted whole
                drop_database(target.server, target.template)
        self._targets.clear()


@pytest.fixture(scope="session")
def contract_pg() -> Iterator[PgTargets]:
    targets = PgTargets()
    try:
        yield targets
    finally:
        targets.close()


@contextlib.contextmanager
def _pg_backend(param: str, request: pytest.FixtureRequest,
                contract_pg: PgTargets) -> Iterator[PgBackend]:
    server_name = param.removeprefix("pg:")
    target = contract_pg.get(server_name, request)
    name = f"qlc_{os.getpid()}_{next(_DATABASES)}"
    create_database(target.server, name, template=target.template)
    with target.server.connect(name) as conn:
        provision_roles(conn)
    database = PgTestDatabase(target.server, name)
    pg = PgBackend(db=database, name=param)
    try:
        yield pg
    finally:
        pg.close()
        database.close()
        drop_database(target.server, name)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, clock: FakeClock, contract_pg: PgTargets) -> Iterator[Backend]:
    param = str(request.param)
    if param == "sqlite":
        yield SqliteBackend(stores=request.getfixturevalue("sqlite_stores"), fake_clock=clock)
        return
    with _pg_backend(param, request, contract_pg) as pg:
        yield pg


@pytest.fixture(params=[name for name in BACKENDS if name.startswith("pg:")])
def pg_backend(request: pytest.FixtureRequest, contract_pg: PgTargets) -> Iterator[PgBackend]:
    """A database several processes serve at once (``Capabilities.shared``: PostgreSQL), on
    every server: for races between sessions, row locks, other replicas' claims, roles and
    COMMIT replies lost on the way back."""
    with _pg_backend(str(request.param), request, contract_pg) as pg:
        yield pg


@pytest.fixture
def web_demo(backend: Backend) -> Iterator[Stores]:
    """The stores as the HTTP API opens them (ql_web on PostgreSQL: it publishes, saves
    scripts and sets environments), with the project ``demo``."""
    stores = open_database(backend.url("ql_web"), clock=backend.clock(), role=Role.WEB)
    try:
        stores.definitions.project_create(ProjectCreateParams(project_id="demo"))
        yield stores
    finally:
        stores.close()


@pytest.fixture
def demo_services(web_demo: Stores, backend: Backend) -> Services:
    """Every use case over ``web_demo``."""
    return Services(stores=web_demo, clock=backend.clock())
