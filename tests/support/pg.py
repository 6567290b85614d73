"""PostgreSQL for tests: embedded PostgreSQL 18 always, the system server when it answers.

Loaded as a pytest plugin. Every test that uses ``pg_server`` (directly or through
``pg_db``) runs once per available server. A missing embedded server is an error, never
a skip. Each test gets its own database cloned from a migrated template.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from qinglong.storage.postgres.connection import PgConnection
from qinglong.storage.postgres.migrate import migrate
from qinglong.storage.postgres.roles import provision_roles
from testkit.postgres import EmbeddedPostgres

SYSTEM_PORT = 5432
EMBEDDED = "pg18-embedded"
SYSTEM = "pg-system"


def _system_answers() -> bool:
    try:
        with psycopg.connect(host="127.0.0.1", port=SYSTEM_PORT, user="postgres", dbname="postgres",
                             connect_timeout=2):
            return True
    except psycopg.Error:
        return False


SYSTEM_ANSWERS = _system_answers()
SERVERS = [EMBEDDED] + ([SYSTEM] if SYSTEM_ANSWERS else [])
_COUNTER = itertools.count(1)
_RUN = f"{os.getpid()}"


def pytest_report_header() -> list[str]:
    line = "PostgreSQL: embedded 18 (started by the harness)"
    if SYSTEM_ANSWERS:
        line += f" and the system server on 127.0.0.1:{SYSTEM_PORT}"
    else:
        line += f"; nothing answers on 127.0.0.1:{SYSTEM_PORT}, so only embedded 18 takes part"
    return [line]


# Folders whose tests run on the embedded server only: they drive whole processes for tens of
# seconds and judge the scheduler, not a dialect (the contract and integration suites cover
# every server). The system server still takes part in everything else.
ONCE_FOLDERS = ("faults", "e2e")
# Files elsewhere that judge the scheduler in real time, not a dialect: the idle cap and the
# wake-up of a `ql control` replica (tests/contract/test_wakeups.py hears LISTEN/NOTIFY on
# every server).
ONCE_FILES = ("test_schedule_wakeups.py",)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "pg_server" in metafunc.fixturenames:
        path = metafunc.definition.path
        once = path.parent.name in ONCE_FOLDERS or path.name in ONCE_FILES
        servers = [EMBEDDED] if once else SERVERS
        metafunc.parametrize("pg_server", servers, indirect=True, scope="session")


@dataclass
class PgServer:
    name: str
    host: str
    port: int
    embedded: EmbeddedPostgres | None = None
    version_num: int = 0

    def url(self, user: str = "postgres", dbname: str = "postgres") -> str:
        return f"postgresql://{user}@{self.host}:{self.port}/{dbname}"

    def connect(self, dbname: str = "postgres", user: str = "postgres") -> PgConnection:
        conn = psycopg.connect(self.url(user, dbname), autocommit=True, row_factory=dict_row)
        return conn


@dataclass
class PgTestDatabase:
    server: PgServer
    name: str
    _conns: list[PgConnection] = field(default_factory=list)

    def url(self, role: str = "ql_runtime") -> str:
        return self.server.url(role, self.name)

    def superuser(self) -> PgConnection:
        """An autocommit superuser connection with ``search_path`` at the qinglong schema."""
        conn = self.server.connect(self.name)
        conn.execute("SET search_path = qinglong, public")
        self._conns.append(conn)
        return conn

    def execute(self, statement: str, params: object = None) -> list[dict[str, object]]:
        conn = self._conns[0] if self._conns else self.superuser()
        cursor = conn.execute(statement, params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []

    def close(self) -> None:
        for conn in self._conns:
            conn.close()
        self._conns.clear()


def server_cpu_seconds(data_dir: Path) -> float | None:
    """The CPU seconds a running server's postmaster and its ended backends have used."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text().split()[0])
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return None
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


@pytest.fixture(scope="session")
def embedded_pg() -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(fsync=False).start()
    try:
        yield server
    finally:
        profile = os.environ.get("QL_CPU_PROFILE")  # tests/conftest.py: where CPU goes
        spent = server_cpu_seconds(server.data_dir) if profile else None
        if profile and spent is not None:
            with open(profile, "a") as out:
                out.write(f"{spent:.2f} <embedded PostgreSQL server of this worker>\n")
        server.cleanup()


@pytest.fixture(scope="session")
def pg_server(request: pytest.FixtureRequest) -> PgServer:
    if request.param == EMBEDDED:
        embedded: EmbeddedPostgres = request.getfixturevalue("embedded_pg")
        server = PgServer(EMBEDDED, "127.0.0.1", embedded.port, embedded)
    else:
        server = PgServer(SYSTEM, "127.0.0.1", SYSTEM_PORT)
    with server.connect() as conn:
        row = conn.execute("SELECT current_setting('server_version_num')::int AS v").fetchone()
        assert row is not None
        server.version_num = int(row["v"])
    return server


def create_database(server: PgServer, name: str, template: str | None = None) -> None:
    with server.connect() as conn:
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            statement = sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                sql.Identifier(name), sql.Identifier(template))
        conn.execute(statement)


def drop_database(server: PgServer, name: str) -> None:
    with server.connect() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def pg_template(pg_server: PgServer) -> Iterator[str]:
    name = f"qltpl_{_RUN}"
    drop_database(pg_server, name)
    create_database(pg_server, name)
    with pg_server.connect(name) as conn:
        provision_roles(conn)
        migrate(conn)
    try:
        yield name
    finally:
        drop_database(pg_server, name)


@pytest.fixture
def pg_db(pg_server: PgServer, pg_template: str) -> Iterator[PgTestDatabase]:
    name = f"qlt_{_RUN}_{next(_COUNTER)}"
    create_database(pg_server, name, template=pg_template)
    with pg_server.connect(name) as conn:
        provision_roles(conn)
    database = PgTestDatabase(pg_server, name)
    try:
        yield database
    finally:
        database.close()
        drop_database(pg_server, name)


@pytest.fixture
def pg_empty_db(pg_server: PgServer) -> Iterator[PgTestDatabase]:
    """A database with nothing in it (for migration tests)."""
    name = f"qle_{_RUN}_{next(_COUNTER)}"
    create_database(pg_server, name)
    database = PgTestDatabase(pg_server, name)
    try:
        yield database
    finally:
        database.close()
        drop_database(pg_server, name)
