"""The HTTP API fuzzed from its own OpenAPI document (tests/support/fuzz_support.py says what
each case is checked for): `ql serve --http` on SQLite and `ql web` on PostgreSQL, every
operation the document lists, as a viewer (each write: refused and nothing written) and as an
admin (valid and invalid cases: no 5xx, answers as documented, refusals as problems, nothing
written by a refusal).

`make test` runs a short deterministic run (a fixed seed, FEW examples per operation and
mode); `make fuzz` (marked long) runs MANY on both databases, with FUZZ_SEED=N to vary the
seed (default: the same one).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from tests.e2e.test_api_sqlite import migrated
from tests.integration.test_api_postgres import _database as pg_database
from tests.support.fuzz_support import Fuzz, Tally, Target, seed_world, start_guarded
from tests.support.pg import PgTestDatabase
from tests.support.test_api_support import Database, Http, make_people

FEW = 2  # examples per operation and mode in `make test` (a viewer's write: 1, refused before
# its body is read)
MANY = int(os.environ.get("FUZZ_EXAMPLES", "150"))  # ... in `make fuzz`
SEED = int(os.environ.get("FUZZ_SEED", "23"))
# What `ql serve`'s own loops write while the fuzz runs (Runs executed, their events and
# notifications, schedules, flow steps, pulls): left out of the admin's before/after
# comparison on SQLite. The viewer's writes come first, while nothing runs, and are compared
# on every table; on PostgreSQL nothing but the API writes (`ql web`), so every table counts.
SERVE_LOOPS = {"runs", "run_attempts", "run_events", "trigger_schedules", "notify_outbox",
               "flow_runs", "flow_steps", "repos", "scripts", "script_revisions",
               "script_blobs"}


def refusal_of(operation: dict[str, object]) -> int | None:
    """What a viewer's write gets: 403 above read scope (the document's x-qinglong-scope)."""
    return 403 if operation.get("x-qinglong-scope") in ("operate", "admin") else None


def fuzz(http: Http, db: Database, url: str, examples: int,
         busy: Callable[[str], bool]) -> Tally:
    """The viewer's writes (``examples`` of each, 1 in the short run), then everything as an
    admin; returns what was sent and found."""
    people = make_people(url)
    admin, viewer = people.tokens["admin"], people.tokens["viewer"]
    existing = seed_world(http, admin, db, url)
    document = http.ok("GET", "/api/v1/openapi.json", admin)
    target = Target(http, document, db, existing)
    run = Fuzz(target, examples=examples, seed=SEED)
    run.run(viewer, writes_only=True, refused=refusal_of,
            examples=1 if examples == FEW else examples,
            skip=lambda method, path: "x-qinglong-scope" not in document["paths"][path][
                method.lower()])  # a public route does not ask who
    target.quiet_tables = lambda table: not busy(table)
    tally = run.run(admin)
    assert http.ok("GET", "/api/v1/session", admin)["role"] == "admin"  # never locked out
    print(f"fuzz: {tally.cases} cases, answers {dict(sorted(tally.statuses.items()))}")
    for key, took in sorted(tally.seconds.items(), key=lambda kv: -kv[1])[:10]:
        print(f"{took:6.2f} s {key}")
    assert not tally.failures, tally.report()
    operations = sum(len(ops) for ops in document["paths"].values())
    assert tally.cases >= operations * examples, (tally.cases, operations)
    return tally


def held_sqlite(conn: sqlite3.Connection) -> Database:
    """The file through one connection held open (autocommit): a snapshot per write case."""
    conn.row_factory = sqlite3.Row

    def query(statement: str) -> list[dict[str, object]]:
        return [dict(row) for row in conn.execute(statement).fetchall()]

    def execute(statement: str, params: tuple[object, ...]) -> None:
        conn.execute(statement, params)

    return Database(query=query, execute=execute, placeholder="?")


def fuzz_sqlite(tmp_path: Path, examples: int) -> None:
    url, path = migrated(tmp_path)
    server = start_guarded(["serve", "--database-url", url, "--http", "127.0.0.1:0",
                            "--interval", "250ms"], tmp_path, "serve")
    try:
        with closing(sqlite3.connect(path, isolation_level=None)) as conn:
            fuzz(server.http, held_sqlite(conn), url, examples, SERVE_LOOPS.__contains__)
    finally:
        assert server.stop() == 0, server.log.read_text()


def fuzz_postgres(pg_db: PgTestDatabase, tmp_path: Path, examples: int) -> None:
    url = pg_db.url("ql_web")
    server = start_guarded(["web", "--database-url", url, "--http", "127.0.0.1:0"], tmp_path,
                           "web")
    try:
        fuzz(server.http, pg_database(pg_db), url, examples, lambda table: False)
    finally:
        assert server.stop() == 0, server.log.read_text()


@pytest.mark.slow
def test_every_route_fuzzed_on_sqlite(tmp_path: Path) -> None:
    fuzz_sqlite(tmp_path, FEW)


@pytest.mark.slow
def test_every_route_fuzzed_on_postgres(pg_db: PgTestDatabase, tmp_path: Path) -> None:
    fuzz_postgres(pg_db, tmp_path, FEW)


@pytest.mark.long
def test_every_route_fuzzed_at_length_on_sqlite(tmp_path: Path) -> None:
    fuzz_sqlite(tmp_path, MANY)


@pytest.mark.long
def test_every_route_fuzzed_at_length_on_postgres(pg_db: PgTestDatabase, tmp_path: Path) -> None:
    fuzz_postgres(pg_db, tmp_path, MANY)
