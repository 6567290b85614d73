"""The named queries of both dialects, and the positional rows of the set-based admission.

A store is written once and runs its queries by name (``tx.one("schedule_claim", ...)``), so
every named block (``-- name: ...``) must exist in both dialects' ``queries/*.sql``: a name
one dialect lacks fails only when that database runs it. The exceptions are named below, each
with the reason only one dialect has it (code that runs them is the dialect's own, or asks a
capability first). The list is kept exact: an entry whose name both dialects have, or neither,
fails too.

The set-based admission (PostgreSQL's ``schedule_admit_batch``) takes each row as a JSON
array; ``storage/admission/writes.py`` builds those arrays from its column tuples and the
statement unpacks them by position, so the two orders are compared here.
"""

from __future__ import annotations

import re
from importlib import resources

import pytest

from qinglong.storage.admission.writes import (
    ATTEMPT_COLUMNS,
    EVENT_COLUMNS,
    MISFIRE_COLUMNS,
    MOVE_COLUMNS,
    NESTED,
    RUN_COLUMNS,
)
from qinglong.storage.sqlfile import load_queries, parse_blocks

SQLITE, POSTGRES = "sqlite", "postgresql"
PACKAGES = {SQLITE: "qinglong.storage.sqlite", POSTGRES: "qinglong.storage.postgres"}

# name -> (the one dialect that has it, why only that one)
DIALECT_ONLY: dict[str, tuple[str, str]] = {
    # the database clock, and wake-ups sent on commit
    "now_ms": (POSTGRES, "the database clock (SQLite's driver reads the node's Clock)"),
    "wake": (POSTGRES, "NOTIFY on commit (Capabilities.listen); SQLite wakes its own process"),
    "notify_runs": (POSTGRES, "the replica's run notifier NOTIFYs workers (cluster profile)"),
    "serializable_session": (POSTGRES, "index scans only under SERIALIZABLE (driver.begin)"),
    # scheduling and leases shared between processes
    "schedule_admit_batch": (POSTGRES, "one set-based write (Capabilities.set_based_writes)"),
    "lifecycle_apply": (POSTGRES, "steps in one statement (Capabilities.set_based_writes)"),
    # ... which SQLite writes with one statement per table
    "lifecycle_runs_update": (SQLITE, "PostgreSQL moves Runs in lifecycle_apply"),
    "lifecycle_attempts_update": (SQLITE, "PostgreSQL moves Attempts in lifecycle_apply"),
    # ... which SQLite writes row by row: the fenced advance and the misfire record
    "schedule_advance_fenced": (SQLITE, "PostgreSQL advances in schedule_admit_batch"),
    "schedule_misfire_insert": (SQLITE, "PostgreSQL records misfires in schedule_admit_batch"),
    # events: one JSON statement where sets are written, else executemany (storage/events.py)
    "events_insert": (POSTGRES, "all of a step's events in one statement (set_based_writes)"),
    "event_insert": (SQLITE, "one event, run by executemany (cheaper than unpacking JSON)"),
    "audit_claims": (POSTGRES, "the claim log: only shared databases write claims"),
    "lease_renew_lock": (POSTGRES, "row locks across processes (Capabilities.shared)"),
    # command output kept in the database (Capabilities.logs_in_database)
    "log_append": (POSTGRES, "output in the database (Capabilities.logs_in_database)"),
    "log_fence_holds": (POSTGRES, "output in the database (Capabilities.logs_in_database)"),
    "log_prune": (POSTGRES, "output in the database (Capabilities.logs_in_database)"),
    "log_read": (POSTGRES, "output in the database (Capabilities.logs_in_database)"),
    "log_trim": (POSTGRES, "output in the database (Capabilities.logs_in_database)"),
    # retention: each dialect's pruner (storage/retention.py picks one)
    "retention_allowed": (POSTGRES, "the pruner checks its role's privileges (roles)"),
    "retention_gate": (POSTGRES, "replicas prune at once behind an advisory lock"),
    "retention_prune_claims": (POSTGRES, "the claim log is pruned where it exists"),
    "retention_events_slice": (SQLITE, "one process sweeps the runs table by rowid"),
    # one process serving the file
    "notify_outbox_release": (SQLITE, "in-flight sends at start were the last server's"),
    # each dialect's migrator and readiness audit
    "ledger_bootstrap": (POSTGRES, "PostgreSQL's migrator creates its ledger in the schema"),
    "migration_timeouts": (POSTGRES, "PostgreSQL's migrator bounds its locks"),
    "migration_try_lock": (POSTGRES, "PostgreSQL's migrator takes an advisory lock"),
    "ledger_create": (SQLITE, "SQLite's migrator creates its ledger"),
    "user_tables": (SQLITE, "SQLite's migrator refuses a file holding someone else's tables"),
    "capability_get": (POSTGRES, "readiness: the capability row of `ql db migrate`"),
    "lifecycle_corrupt": (POSTGRES, "readiness: `ql control` refuses Runs no step can make"),
    "role_attributes": (POSTGRES, "readiness: roles"),
    "role_memberships": (POSTGRES, "readiness: roles"),
    "schema_exists": (POSTGRES, "readiness: the qinglong schema"),
    "schema_privileges": (POSTGRES, "readiness: the privilege matrix"),
    "schema_tables": (POSTGRES, "readiness: the schema's tables"),
    "server_facts": (POSTGRES, "readiness: server version, primary, settings"),
    "session_timeouts": (POSTGRES, "readiness: session timeouts below the lease"),
    "table_privileges": (POSTGRES, "readiness: the privilege matrix"),
}


def _queries() -> dict[str, set[str]]:
    return {dialect: set(load_queries(package)) for dialect, package in PACKAGES.items()}


def test_every_named_query_exists_in_both_dialects_unless_listed() -> None:
    names = _queries()
    for dialect, other in ((SQLITE, POSTGRES), (POSTGRES, SQLITE)):
        missing = sorted(name for name in names[dialect] - names[other]
                         if DIALECT_ONLY.get(name, ("", ""))[0] != dialect)
        assert missing == [], f"only in {dialect}, not in {other}: {missing}"


@pytest.mark.parametrize("name", sorted(DIALECT_ONLY))
def test_a_dialect_only_query_is_in_that_dialect_alone(name: str) -> None:
    names = _queries()
    dialect, reason = DIALECT_ONLY[name]
    other = POSTGRES if dialect == SQLITE else SQLITE
    assert reason.strip()
    assert name in names[dialect], f"{name} is listed for {dialect}, which has no such query"
    assert name not in names[other], f"{name} is in both dialects: drop it from DIALECT_ONLY"


# --- the positional rows of schedule_admit_batch -----------------------------------------------

# a column of a JSON row: ``o->>3 AS name``, ``(o->>3)::integer AS name`` or ``o->10 AS name``
_COLUMN = re.compile(r"\(?\s*o\s*->>?\s*(\d+)\s*\)?(?:::\w+)?\s+AS\s+(\w+)", re.IGNORECASE)
# the select list that unpacks the rows of one array: the argument (the moves) or a list
# each advanced move carries
_UNPACK = re.compile(r"SELECT\s+((?:(?!SELECT).)*?)\s+FROM\s+(?:advanced\s+a,\s+)?"
                     r"jsonb_array_elements\((?:%\((\w+)\)s::jsonb|a\.(\w+))\)",
                     re.IGNORECASE | re.DOTALL)


def _unpacked() -> dict[str, tuple[str, ...]]:
    """For each JSON argument of schedule_admit_batch, its columns in position order."""
    text = resources.files(PACKAGES[POSTGRES]).joinpath(
        "queries", "admission_batch.sql").read_text(encoding="utf-8")
    statement = parse_blocks(text, "admission_batch.sql")["schedule_admit_batch"]
    found: dict[str, tuple[str, ...]] = {}
    for select_list, given, carried in _UNPACK.findall(statement):
        argument = given or carried
        columns = [(int(position), name) for position, name in _COLUMN.findall(select_list)]
        assert [position for position, _ in columns] == list(range(len(columns))), (
            f"{argument}: positions are not 0..n in order: {columns}")
        assert argument not in found, f"{argument} is unpacked twice"
        found[argument] = tuple(name for _, name in columns)
    return found


def test_the_batch_statement_unpacks_each_row_in_the_writers_column_order() -> None:
    assert _unpacked() == {
        "moves": (*MOVE_COLUMNS, *NESTED),
        "runs": RUN_COLUMNS,
        "attempts": ATTEMPT_COLUMNS,
        "events": EVENT_COLUMNS,
        "misfires": MISFIRE_COLUMNS,
    }


def test_the_comparison_is_not_blind() -> None:
    """A statement that swapped two positions would be caught (the parse sees positions)."""
    swapped = "SELECT o->>1 AS id, o->>0 AS run_id FROM jsonb_array_elements(%(runs)s::jsonb)"
    [(select_list, argument, _)] = _UNPACK.findall(swapped)
    assert argument == "runs"
    assert _COLUMN.findall(select_list) == [("1", "id"), ("0", "run_id")]
    carried = "SELECT o->>0 AS id, o->>2 AS run_id FROM advanced a, jsonb_array_elements(a.events)"
    [(select_list, _, argument)] = _UNPACK.findall(carried)
    assert argument == "events"
    assert _COLUMN.findall(select_list) == [("0", "id"), ("2", "run_id")]
