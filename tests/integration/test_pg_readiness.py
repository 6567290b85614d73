"""Readiness on real PostgreSQL: migrations, the runner's advisory lock, refused drift, the
exact grant matrix (in the audit and in behaviour), the capability row, a read-only
database, role attributes, and `ql db migrate` / `ql db check` end to end.

Roles are cluster-wide: every change to a role is made inside a superuser transaction that
is always rolled back, so no other session (or test run) ever sees it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from importlib import resources
from typing import Any

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql

from qinglong.errors import NotReady, ServerNotWritable
from qinglong.storage.postgres.connection import PgConnection, connect
from qinglong.storage.postgres.migrate import MIGRATIONS, migrate
from qinglong.storage.postgres.readiness import audit
from qinglong.storage.postgres.roles import (
    ADMIN,
    APP_ROLES,
    MIGRATION,
    PRIVILEGES,
    ROLES,
    RUNTIME,
    WEB,
    WORKER_INGRESS,
    provision_roles,
)
from tests.integration.conftest import Cluster
from tests.support.pg import PgServer, PgTestDatabase, drop_database
from tests.support.ql_process import run_ql

APPLICATION = "ql-readiness-test"
SUPERUSER = "postgres"
EVERYONE = (*ROLES, SUPERUSER)
TABLES = frozenset().union(*PRIVILEGES.values())  # every table some role may use
LOCK_KEY = (20812, 768)
SAFE_ATTRIBUTES = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"

Row = dict[str, Any]


# --- helpers -------------------------------------------------------------------------


def open_as(db: PgTestDatabase, role: str) -> PgConnection:
    """A new autocommit connection to ``db`` as ``role`` (``postgres`` is the superuser)."""
    return connect(db.url(role), application_name=APPLICATION)


def audit_as(db: PgTestDatabase, role: str) -> list[str]:
    with open_as(db, role) as conn:
        return audit(conn)


def audit_everyone(db: PgTestDatabase) -> dict[str, list[str]]:
    return {role: audit_as(db, role) for role in EVERYONE}


def ledger(db: PgTestDatabase) -> list[Row]:
    return db.execute("SELECT migration_id, stream_id, dialect, checksum, applied_at_ms "
                      "FROM schema_migrations ORDER BY migration_id")


def relations(db: PgTestDatabase) -> list[Row]:
    return db.execute(
        "SELECT c.relname, c.relkind::text AS relkind, pg_get_userbyid(c.relowner) AS owner, "
        "c.relacl::text AS acl FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = 'qinglong' ORDER BY c.relname")


def durable_state(db: PgTestDatabase) -> dict[str, list[Row]]:
    """Everything a migration runner could write: ledger, capability row, relations, ACLs."""
    return {
        "ledger": ledger(db),
        "capabilities": db.execute("SELECT * FROM schema_capabilities ORDER BY contract_name"),
        "relations": relations(db),
        "schema": db.execute("SELECT pg_get_userbyid(nspowner) AS owner, nspacl::text AS acl "
                             "FROM pg_namespace WHERE nspname = 'qinglong'"),
    }


def schema_present(db: PgTestDatabase) -> bool:
    return db.execute("SELECT to_regnamespace('qinglong') IS NOT NULL AS present")[0]["present"] is True


@contextlib.contextmanager
def migration_lock_held(db: PgTestDatabase) -> Iterator[None]:
    """Another session holds the runner's advisory lock (session level) until the block ends.
    The lock is released by an unlock the server has answered, not by closing the connection:
    a backend lets go of its session locks only once it has seen the close, which a runner
    started at once can beat (a clean-clone run saw the lock still held)."""
    holder = db.server.connect(db.name)
    try:
        holder.execute("SELECT pg_advisory_lock(%s, %s)", LOCK_KEY)
        yield
        unlocked = holder.execute(
            "SELECT pg_advisory_unlock(%s, %s) AS released", LOCK_KEY).fetchone()
        assert unlocked is not None and unlocked["released"] is True
    finally:
        holder.close()


def refused_while_held(conn: PgConnection) -> NotReady:
    """``migrate`` on ``conn`` inside `migration_lock_held`: its answer, given while the holder
    still holds the lock. This session waits for locks without a timeout, so a runner that
    waited for the holder would still be waiting when the wait below gives up (the holder lets
    go only after it): answering at all shows it never waited."""
    conn.execute("SET lock_timeout = 0")
    answers: list[BaseException] = []

    def run() -> None:
        try:
            migrate(conn)
        except BaseException as exc:  # judged below
            answers.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    runner.join(60)
    assert not runner.is_alive(), "the migration runner waited for the lock's holder"
    [answer] = answers
    assert isinstance(answer, NotReady), answer
    return answer


@contextlib.contextmanager
def rolled_back(db: PgTestDatabase) -> Iterator[PgConnection]:
    """A superuser transaction that always rolls back: cluster-wide changes made in it are
    visible to this session only, and vanish even if the test process dies."""
    conn = open_as(db, SUPERUSER)
    try:
        conn.execute("BEGIN")
        yield conn
    finally:
        with contextlib.suppress(psycopg.Error):
            conn.execute("ROLLBACK")
        conn.close()


def restore_role_if_changed(server: PgServer, role: str) -> bool:
    """Put ``role`` back to the provisioned attributes if it differs; True when it was intact."""
    with server.connect() as conn:
        row = conn.execute(
            "SELECT rolcanlogin AND NOT (rolsuper OR rolcreatedb OR rolcreaterole OR rolreplication "
            "OR rolbypassrls) AS intact FROM pg_roles WHERE rolname = %s", [role]).fetchone()
        if row is not None and row["intact"]:
            return True
        conn.execute(sql.SQL("ALTER ROLE {} " + SAFE_ATTRIBUTES).format(sql.Identifier(role)))
        return False


def denied(conn: PgConnection, statement: str) -> str:
    """Run ``statement``; it must fail for lack of privilege. Returns the server's message."""
    with pytest.raises(pg_errors.InsufficientPrivilege) as caught:
        conn.execute(statement)  # type: ignore[call-overload]
    return str(caught.value)


# --- 1. migration on an empty database -----------------------------------------------


def test_migrate_applies_both_migrations_once_and_ql_migration_owns_everything(
    pg_empty_db: PgTestDatabase,
) -> None:
    db = pg_empty_db
    with open_as(db, SUPERUSER) as conn:
        provision_roles(conn)
        first = migrate(conn)
        second = migrate(conn)
    assert first.applied == tuple(m.id for m in MIGRATIONS)
    assert first.current == second.current == MIGRATIONS[-1].id
    assert second.applied == ()
    with open_as(db, MIGRATION) as conn:
        assert migrate(conn).applied == ()

    found = relations(db)
    assert {r["relname"] for r in found if r["relkind"] in ("r", "v")} == TABLES
    assert [(r["relname"], r["owner"]) for r in found if r["owner"] != MIGRATION] == []
    assert db.execute("SELECT pg_get_userbyid(nspowner) AS owner FROM pg_namespace "
                      "WHERE nspname = 'qinglong'") == [{"owner": MIGRATION}]

    files = resources.files("qinglong.storage.postgres").joinpath("migrations")
    on_disk = [hashlib.sha256(files.joinpath(f"{m.id}.sql").read_bytes()).hexdigest()
               for m in MIGRATIONS]
    assert on_disk == [m.checksum for m in MIGRATIONS]
    assert [(r["migration_id"], r["stream_id"], r["dialect"], r["checksum"].strip())
            for r in ledger(db)] == [
        (m.id, "postgresql-main", "postgresql", m.checksum) for m in MIGRATIONS]
    assert audit_everyone(db) == {role: [] for role in EVERYONE}


# --- 2. the advisory lock ------------------------------------------------------------


def test_a_held_migration_lock_fails_fast_and_applies_nothing(pg_empty_db: PgTestDatabase) -> None:
    db = pg_empty_db
    with open_as(db, SUPERUSER) as conn:
        provision_roles(conn)
    with migration_lock_held(db), open_as(db, SUPERUSER) as conn:
        refused = refused_while_held(conn)  # a try-lock: no waiting for the holder
    assert refused.findings == ("migration-lock-held",)
    tables = {r["relname"] for r in relations(db) if r["relkind"] == "r"}
    assert tables <= {"schema_migrations"}
    if tables:
        assert ledger(db) == []
    with open_as(db, SUPERUSER) as conn:  # released: the same runner goes through
        assert migrate(conn).applied == tuple(m.id for m in MIGRATIONS)


def test_a_held_migration_lock_leaves_a_migrated_database_untouched(pg_db: PgTestDatabase) -> None:
    before = durable_state(pg_db)
    for role in (SUPERUSER, MIGRATION):
        with migration_lock_held(pg_db), open_as(pg_db, role) as conn:
            refused = refused_while_held(conn)
        assert refused.findings == ("migration-lock-held",)
    assert durable_state(pg_db) == before


def test_a_held_migration_lock_creates_no_schema(pg_empty_db: PgTestDatabase) -> None:
    db = pg_empty_db
    with open_as(db, SUPERUSER) as conn:
        provision_roles(conn)
    with migration_lock_held(db), open_as(db, SUPERUSER) as conn, pytest.raises(NotReady):
        migrate(conn)
    assert not schema_present(db)


# --- 3. drift is refused, never repaired -----------------------------------------------

DRIFT = [
    pytest.param("UPDATE schema_migrations SET checksum = repeat('f', 64) "
                 "WHERE migration_id = '0002_role_grants'",
                 "checksum-mismatch:0002_role_grants", id="changed-checksum"),
    pytest.param("UPDATE schema_migrations SET checksum = repeat('0', 64) "
                 "WHERE migration_id = '0001_core'",
                 "checksum-mismatch:0001_core", id="changed-checksum-of-the-first"),
    pytest.param("INSERT INTO schema_migrations (migration_id, stream_id, dialect, checksum, "
                 "applied_at_ms) VALUES ('0003_from_the_future', 'postgresql-main', 'postgresql', "
                 "repeat('a', 64), 0)",
                 "unknown-migration:0003_from_the_future", id="unknown-migration"),
    pytest.param("DELETE FROM schema_migrations WHERE migration_id = '0001_core'",
                 "migration-out-of-order:0002_role_grants", id="deleted-row"),
    pytest.param("DELETE FROM schema_migrations WHERE migration_id = '0002_role_grants'",
                 "migration-out-of-order:0003_lifecycle", id="deleted-middle-row"),
]


@pytest.mark.parametrize(("tamper", "finding"), DRIFT)
def test_drift_is_refused_and_never_repaired(pg_db: PgTestDatabase, tamper: str, finding: str) -> None:
    clean = ledger(pg_db)
    pg_db.execute(tamper)
    before = durable_state(pg_db)
    assert before["ledger"] != clean
    for role in (SUPERUSER, MIGRATION):
        with open_as(pg_db, role) as conn, pytest.raises(NotReady) as caught:
            migrate(conn)
        assert finding in caught.value.findings
    assert durable_state(pg_db) == before
    audits = audit_everyone(pg_db)
    assert {role: finding in found for role, found in audits.items()} == dict.fromkeys(EVERYONE, True), audits


def test_a_missing_last_migration_is_not_ready_until_migrate_applies_it(pg_db: PgTestDatabase) -> None:
    # As a database migrated by an older qinglong looks: the newest migration (and what it
    # adds to the capability row) not there yet. Undo 0008_accounts by hand (its tables, its
    # ledger row, its capability), so the migration really runs again; 0009_web_controls (only
    # grants, which stay) comes after it, so its ledger row goes too; so do 0010_retention's
    # table and indexes (its grants stay, like 0009's), 0011_login_devices' table,
    # 0012_eligibility's view, 0013_lean_indexes' index changes (reversed) and
    # 0014_placement's and 0015_parameters' columns, and 0016_flows' tables (its grants on
    # runs and run_attempts stay, like 0009's), and 0017_unplaceable's column, constraints and
    # index (its grant of UPDATE on notify_rules stays); 0018_flow_triggers' columns and index
    # go with 0016's flow_runs; 0019_scripts' tables go; so do 0021_project_env's tables and
    # its columns of run_attempts (its grant of INSERT on audit_log to ql_admin goes with
    # 0008's audit_log); 0020_notify_events' index goes and its constraints go back to
    # 0006's (0017's come back when it runs again); 0022_repos' table goes; so does 0023_deps',
    # and 0024_grants' (its columns go with 0008's users and api_tokens).
    # 0025_totp's tables go too; 0026_oidc's tables go; so do
    # 0027_labels' and 0028_pins' tables; 0029_audit_filters' indexes go with 0008's audit_log;
    # 0030_session_method's column goes with 0008's user_sessions; 0031_web_limits' grant stays
    # (like 0009's); 0032_runtime_labels' grants go with 0027's tables; 0033_lean_run_writes'
    # change is reversed (the events' primary key back), and so is 0034_runs_project_reference's
    # (the Runs' reference to their project back) and 0035_claim_owner_check's and
    # 0036_claim_owner_without_regex's (the owner's check with its bounded repetition back).
    pg_db.execute("""
        DELETE FROM schema_migrations
         WHERE migration_id IN ('0008_accounts', '0009_web_controls', '0010_retention',
                                '0011_login_devices', '0012_eligibility', '0013_lean_indexes',
                                '0014_placement', '0015_parameters', '0016_flows',
                                '0017_unplaceable', '0018_flow_triggers', '0019_scripts',
                                '0020_notify_events', '0021_project_env', '0022_repos',
                                '0023_deps', '0024_grants', '0025_totp', '0026_oidc',
                                '0027_labels', '0028_pins', '0029_audit_filters',
                                '0030_session_method', '0031_web_limits',
                                '0032_runtime_labels', '0033_lean_run_writes',
                                '0034_runs_project_reference', '0035_claim_owner_check',
                                '0036_claim_owner_without_regex');
        UPDATE schema_capabilities SET contract_version = contract_version - 1,
            capabilities = capabilities - 'accounts',
            migration_id = (SELECT max(migration_id) FROM schema_migrations);
        DROP TABLE user_pins, saved_filters;
        DROP TABLE task_labels, trigger_labels;
        DROP TABLE user_grants;
        DROP TABLE oidc_identities, oidc_pending_logins;
        DROP TABLE user_recovery_codes, user_second_factors;
        DROP TABLE login_devices, audit_log, login_failures, api_tokens, user_sessions, users;
        DROP TABLE retention_marks;
        DROP VIEW eligible_triggers;
        DROP INDEX trigger_schedule_claims_acquired_idx, runs_finished_idx, runs_queued_idx;
        CREATE INDEX trigger_schedules_claim_expiry_idx ON trigger_schedules
            (claim_expires_at_ms, project_id, trigger_id) WHERE claim_token IS NOT NULL;
        CREATE INDEX runs_status_idx ON runs (status, queued_at_ms, id);
        CREATE INDEX run_attempts_status_idx ON run_attempts (status, run_id, created_at_ms, id);
        DROP INDEX runs_labelled_queued_idx;
        ALTER TABLE runs DROP COLUMN requires;
        ALTER TABLE instances DROP COLUMN labels;
        ALTER TABLE runs DROP COLUMN parameters;
        DROP TABLE flow_steps, flow_runs, flow_revisions, flows;
        DROP TABLE script_revisions, scripts, script_blobs;
        DROP TABLE project_env_entries, project_env_revisions, secret_keyring;
        DROP TABLE repos;
        DROP TABLE dep_set_revisions;
        ALTER TABLE run_attempts DROP COLUMN environment_revision,
            DROP COLUMN environment_digest;
        DROP INDEX run_events_progress_idx;
        ALTER TABLE run_events REPLICA IDENTITY DEFAULT;
        ALTER TABLE run_events ADD CONSTRAINT run_events_pkey PRIMARY KEY (id);
        ALTER TABLE runs ADD CONSTRAINT runs_project_id_fkey
            FOREIGN KEY (project_id) REFERENCES projects (id);
        ALTER TABLE trigger_schedules DROP CONSTRAINT trigger_schedules_claim_owner_check;
        ALTER TABLE trigger_schedules ADD CONSTRAINT trigger_schedules_claim_owner_check
            CHECK (claim_owner ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$');
        ALTER TABLE notify_channels DROP CONSTRAINT notify_channels_kind_check;
        ALTER TABLE notify_channels ADD CONSTRAINT notify_channels_kind_check
            CHECK (kind IN ('webhook', 'email', 'template'));
        ALTER TABLE notify_cursors DROP CONSTRAINT notify_cursors_source_check;
        ALTER TABLE notify_cursors ADD CONSTRAINT notify_cursors_source_check
            CHECK (source IN ('run_outcomes', 'misfires'));
        ALTER TABLE notify_rules DROP CONSTRAINT notify_rules_after_check;
        ALTER TABLE notify_rules DROP COLUMN after_ms;
        ALTER TABLE notify_rules DROP CONSTRAINT notify_rules_event_check;
        ALTER TABLE notify_rules ADD CONSTRAINT notify_rules_event_check
            CHECK (event IN ('failed', 'timed_out', 'lost', 'cancelled', 'misfired', 'recovered'));
    """)
    audits = audit_everyone(pg_db)
    # every role is told it is not ready; the roles with privileges on the tables the
    # migration adds are also told that they are missing
    with_tables = {"ql_web", "postgres"}  # postgres: the superuser sees all
    # (ql_admin may insert into audit_log since 0021_project_env)
    missing = [f"missing-table:{t}" for t in
               ("api_tokens", "audit_log", "login_devices", "login_failures",
                "user_recovery_codes", "user_second_factors", "user_grants",
                "oidc_identities", "oidc_pending_logins",
                "user_pins", "saved_filters",
                "user_sessions", "users")]
    marks = {"ql_runtime", "postgres"}  # the roles with privileges on retention_marks, the view
    flow_tables = {  # the flow tables each role has privileges on
        "ql_admin": ("flow_revisions", "flows"), "ql_web": ("flow_revisions", "flow_runs",
                                                            "flow_steps", "flows"),
        "ql_runtime": ("flow_revisions", "flow_runs", "flow_steps", "flows"),
        "ql_worker": ("flow_revisions", "flow_runs", "flow_steps"),
        "postgres": ("flow_revisions", "flow_runs", "flow_steps", "flows")}
    script_tables = {  # the script tables each role has privileges on (0019_scripts)
        "ql_admin": ("script_blobs", "script_revisions", "scripts"),
        "ql_web": ("script_blobs", "script_revisions", "scripts"),
        "ql_worker": ("script_blobs",),
        "postgres": ("script_blobs", "script_revisions", "scripts")}
    env_tables = {  # the project environment tables each role has privileges on (0021)
        "ql_admin": ("audit_log", "project_env_entries", "project_env_revisions",
                     "secret_keyring"),
        "ql_web": ("project_env_entries", "project_env_revisions", "secret_keyring"),
        "ql_worker": ("project_env_entries", "project_env_revisions"),
        "ql_runtime": ("project_env_entries", "project_env_revisions"),
        "postgres": ("project_env_entries", "project_env_revisions", "secret_keyring")}
    repo_tables = {"ql_admin": ("repos",), "ql_web": ("repos",), "ql_runtime": ("repos",),
                   "postgres": ("repos",)}
    deps_tables = {"ql_admin": ("dep_set_revisions",), "ql_web": ("dep_set_revisions",),
                   "ql_worker": ("dep_set_revisions",), "postgres": ("dep_set_revisions",)}
    label_tables = {role: ("task_labels", "trigger_labels")  # 0027_labels
                    for role in ("ql_admin", "ql_web", "ql_runtime", "postgres")}
    pending = ["missing-migration:0008_accounts", "missing-migration:0009_web_controls",
               "missing-migration:0010_retention", "missing-migration:0011_login_devices",
               "missing-migration:0012_eligibility", "missing-migration:0013_lean_indexes",
               "missing-migration:0014_placement", "missing-migration:0015_parameters",
               "missing-migration:0016_flows", "missing-migration:0017_unplaceable",
               "missing-migration:0018_flow_triggers", "missing-migration:0019_scripts",
               "missing-migration:0020_notify_events", "missing-migration:0021_project_env",
               "missing-migration:0022_repos", "missing-migration:0023_deps",
               "missing-migration:0024_grants",
               "missing-migration:0025_totp", "missing-migration:0026_oidc",
               "missing-migration:0027_labels", "missing-migration:0028_pins",
               "missing-migration:0029_audit_filters",
               "missing-migration:0030_session_method",
               "missing-migration:0031_web_limits", "missing-migration:0032_runtime_labels",
               "missing-migration:0033_lean_run_writes",
               "missing-migration:0034_runs_project_reference",
               "missing-migration:0035_claim_owner_check",
               "missing-migration:0036_claim_owner_without_regex"]
    assert audits == {role: [*pending, *sorted(
                          (missing if role in with_tables else [])
                          + (["missing-table:eligible_triggers", "missing-table:retention_marks"]
                             if role in marks else [])
                          + [f"missing-table:{t}" for t in flow_tables.get(role, ())]
                          + [f"missing-table:{t}" for t in script_tables.get(role, ())]
                          + [f"missing-table:{t}" for t in env_tables.get(role, ())]
                          + [f"missing-table:{t}" for t in repo_tables.get(role, ())]
                          + [f"missing-table:{t}" for t in deps_tables.get(role, ())]
                          + [f"missing-table:{t}" for t in label_tables.get(role, ())])]
                      for role in EVERYONE}, audits
    with open_as(pg_db, MIGRATION) as conn:
        # pending is applied, not drift
        assert migrate(conn).applied == ("0008_accounts", "0009_web_controls", "0010_retention",
                                         "0011_login_devices", "0012_eligibility",
                                         "0013_lean_indexes", "0014_placement", "0015_parameters",
                                         "0016_flows", "0017_unplaceable",
                                         "0018_flow_triggers", "0019_scripts",
                                         "0020_notify_events", "0021_project_env",
                                         "0022_repos", "0023_deps", "0024_grants", "0025_totp",
                                         "0026_oidc", "0027_labels", "0028_pins",
                                         "0029_audit_filters", "0030_session_method",
                                         "0031_web_limits", "0032_runtime_labels",
                                         "0033_lean_run_writes",
                                         "0034_runs_project_reference",
                                         "0035_claim_owner_check",
                                         "0036_claim_owner_without_regex")
    assert audit_everyone(pg_db) == {role: [] for role in EVERYONE}


# --- 4. a clean database is ready for every role -------------------------------------------


def test_a_clean_database_is_ready_for_every_role(pg_db: PgTestDatabase) -> None:
    assert audit_everyone(pg_db) == {role: [] for role in EVERYONE}


# --- 5. one privilege too many fails like one too few --------------------------------------

_OWNER_PRIVILEGES = ("DELETE", "INSERT", "REFERENCES", "SELECT", "TRIGGER", "TRUNCATE", "UPDATE")
_MAINTAIN_FROM = 170000  # PostgreSQL 17 added the MAINTAIN table privilege

PRIVILEGE_DRIFT = [
    pytest.param(("GRANT INSERT ON trigger_schedules TO ql_runtime",), RUNTIME,
                 ("extra-privilege:ql_runtime:trigger_schedules:INSERT",), id="runtime-insert-schedules"),
    pytest.param(("REVOKE UPDATE ON trigger_schedules FROM ql_runtime",), RUNTIME,
                 ("missing-privilege:ql_runtime:trigger_schedules:UPDATE",), id="runtime-no-update-schedules"),
    pytest.param(("GRANT SELECT ON runs TO ql_admin",), ADMIN,
                 ("extra-privilege:ql_admin:runs:SELECT",), id="admin-select-runs"),
    pytest.param(("GRANT SELECT ON triggers TO ql_worker_ingress",), WORKER_INGRESS,
                 ("extra-privilege:ql_worker_ingress:triggers:SELECT",), id="ingress-select-triggers"),
    pytest.param(("GRANT CREATE ON SCHEMA qinglong TO ql_runtime",), RUNTIME,
                 ("extra-privilege:ql_runtime:schema:CREATE",), id="runtime-create-on-schema"),
    pytest.param(("GRANT DELETE ON runs TO ql_runtime",), RUNTIME,
                 ("extra-privilege:ql_runtime:runs:DELETE",), id="runtime-delete-runs"),
    pytest.param(("GRANT TRUNCATE ON run_attempts TO ql_worker_ingress",), WORKER_INGRESS,
                 ("extra-privilege:ql_worker_ingress:run_attempts:TRUNCATE",), id="ingress-truncate"),
    pytest.param(("GRANT REFERENCES, TRIGGER ON projects TO ql_admin",), ADMIN,
                 ("extra-privilege:ql_admin:projects:REFERENCES",
                  "extra-privilege:ql_admin:projects:TRIGGER"), id="admin-references-trigger"),
    pytest.param(("REVOKE INSERT ON run_events FROM ql_runtime",), RUNTIME,
                 ("missing-privilege:ql_runtime:run_events:INSERT",), id="runtime-no-insert-events"),
    pytest.param(("GRANT SELECT ON triggers TO PUBLIC",), WORKER_INGRESS,
                 ("extra-privilege:ql_worker_ingress:triggers:SELECT",), id="public-select-triggers"),
    pytest.param(('GRANT CREATE ON DATABASE "{db}" TO ql_admin',), ADMIN,
                 ("extra-privilege:ql_admin:database:CREATE",), id="admin-create-on-database"),
    pytest.param(("CREATE TABLE extra_notes (id integer PRIMARY KEY)",
                  "ALTER TABLE extra_notes OWNER TO ql_migration",
                  "GRANT SELECT, INSERT ON extra_notes TO ql_runtime"), RUNTIME,
                 ("extra-privilege:ql_runtime:extra_notes:INSERT",
                  "extra-privilege:ql_runtime:extra_notes:SELECT"), id="extra-table-granted"),
    pytest.param(("CREATE TABLE stray (id integer)", "ALTER TABLE stray OWNER TO ql_runtime"), RUNTIME,
                 ("owns-table:ql_runtime:stray",
                  *(f"extra-privilege:ql_runtime:stray:{p}" for p in _OWNER_PRIVILEGES)),
                 id="table-owned-by-runtime"),
    pytest.param(("CREATE TABLE stray (id integer)",), MIGRATION,
                 ("table-owner:stray:postgres",), id="table-owned-by-superuser"),
    pytest.param(("REVOKE USAGE ON SCHEMA qinglong FROM ql_worker_ingress",), WORKER_INGRESS,
                 ("missing-privilege:ql_worker_ingress:schema:USAGE",), id="ingress-no-schema-usage"),
    pytest.param(("REVOKE SELECT ON schema_migrations FROM ql_runtime",), RUNTIME,
                 ("missing-privilege:ql_runtime:schema_migrations:SELECT",), id="runtime-no-ledger-select"),
    pytest.param(('GRANT TEMPORARY ON DATABASE "{db}" TO ql_admin',), ADMIN,
                 ("extra-privilege:ql_admin:database:TEMPORARY",), id="admin-temporary-on-database"),
    pytest.param(("GRANT DELETE ON runs TO ql_web",), WEB,
                 ("extra-privilege:ql_web:runs:DELETE",), id="web-delete-runs"),
    pytest.param(("REVOKE INSERT ON audit_log FROM ql_web",), WEB,
                 ("missing-privilege:ql_web:audit_log:INSERT",), id="web-no-insert-audit"),
]


@pytest.mark.parametrize(("statements", "role", "findings"), PRIVILEGE_DRIFT)
def test_one_privilege_too_many_fails_like_one_too_few(
    pg_db: PgTestDatabase, statements: tuple[str, ...], role: str, findings: tuple[str, ...],
) -> None:
    for statement in statements:
        pg_db.execute(statement.format(db=pg_db.name))
    if "owns-table:ql_runtime:stray" in findings and pg_db.server.version_num >= _MAINTAIN_FROM:
        findings = (*findings, "extra-privilege:ql_runtime:stray:MAINTAIN")
    as_superuser = audit_as(pg_db, SUPERUSER)
    assert set(findings) <= set(as_superuser), as_superuser
    assert audit_as(pg_db, role) == sorted(findings)


def test_a_column_level_grant_is_an_extra_privilege(pg_db: PgTestDatabase) -> None:
    pg_db.execute("GRANT SELECT (id, status) ON runs TO ql_admin")
    with open_as(pg_db, ADMIN) as conn:
        conn.execute("SELECT id, status FROM qinglong.runs")  # the grant is real
        as_admin = audit(conn)
    expected = "extra-privilege:ql_admin:runs"
    assert any(f.startswith(expected) for f in as_admin), as_admin
    as_superuser = audit_as(pg_db, SUPERUSER)
    assert any(f.startswith(expected) for f in as_superuser), as_superuser


def test_a_view_granted_to_a_role_is_an_extra_privilege(cluster: Cluster) -> None:
    cluster.publish("t1")
    db = cluster.db
    db.execute("CREATE VIEW trigger_peek AS SELECT project_id, trigger_id, spec_json "
               "FROM trigger_revisions")
    db.execute("ALTER VIEW trigger_peek OWNER TO ql_migration")
    db.execute("GRANT SELECT ON trigger_peek TO ql_worker_ingress")
    with open_as(db, WORKER_INGRESS) as conn:
        rows = conn.execute("SELECT trigger_id FROM qinglong.trigger_peek").fetchall()
        as_ingress = audit(conn)
    assert rows == [{"trigger_id": "t1"}]  # the role reads trigger data it must never see
    assert any("trigger_peek" in f for f in as_ingress), as_ingress
    as_superuser = audit_as(db, SUPERUSER)
    assert any("trigger_peek" in f for f in as_superuser), as_superuser


def test_the_maintain_privilege_is_an_extra_privilege(pg_db: PgTestDatabase) -> None:
    if pg_db.server.version_num < _MAINTAIN_FROM:
        # Before 17 the privilege does not exist, so it cannot be granted (or missed).
        with pytest.raises(pg_errors.SyntaxError):
            pg_db.execute("GRANT MAINTAIN ON runs TO ql_worker_ingress")
        assert audit_as(pg_db, WORKER_INGRESS) == []
        return
    pg_db.execute("GRANT MAINTAIN ON runs TO ql_worker_ingress")
    with open_as(pg_db, WORKER_INGRESS) as conn:
        conn.execute("BEGIN")
        conn.execute("LOCK TABLE qinglong.runs IN ACCESS EXCLUSIVE MODE")  # the grant is real
        conn.execute("ROLLBACK")
        as_ingress = audit(conn)
    assert "extra-privilege:ql_worker_ingress:runs:MAINTAIN" in as_ingress, as_ingress


# --- 6. the grant matrix in behaviour --------------------------------------------------------

PROBED = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE")


def _probe(conn: PgConnection, table: str, privilege: str, column: str) -> bool:
    """Whether ``privilege`` on ``table`` is usable, in a transaction that always rolls back.

    A statement that fails for any reason other than a privilege (a NOT NULL violation from
    INSERT ... DEFAULT VALUES, a foreign key refusing TRUNCATE) got past the privilege check.
    """
    target = sql.Identifier("qinglong", table)
    statement = {
        "SELECT": sql.SQL("SELECT 1 FROM {} LIMIT 0").format(target),
        "INSERT": sql.SQL("INSERT INTO {} DEFAULT VALUES").format(target),
        "UPDATE": sql.SQL("UPDATE {} SET {} = DEFAULT WHERE false").format(
            target, sql.Identifier(column)),
        "DELETE": sql.SQL("DELETE FROM {} WHERE false").format(target),
        "TRUNCATE": sql.SQL("TRUNCATE {}").format(target),
    }[privilege]
    if privilege != "SELECT" and _is_view(conn, table):
        # a view that joins tables cannot be written at all, and PostgreSQL says so before it
        # checks privileges; what is granted on it is then the whole answer
        granted = conn.execute("SELECT has_table_privilege(%s, %s) AS granted",
                               (f"qinglong.{table}", privilege)).fetchone()
        return bool(granted and granted["granted"])
    conn.execute("BEGIN")
    try:
        conn.execute(statement)
    except pg_errors.InsufficientPrivilege:
        return False
    except psycopg.DatabaseError:
        return True
    finally:
        conn.execute("ROLLBACK")
    return True


def _is_view(conn: PgConnection, table: str) -> bool:
    row = conn.execute("SELECT relkind::text AS relkind FROM pg_class WHERE oid = %s::regclass",
                       (f"qinglong.{table}",)).fetchone()
    return bool(row and row["relkind"] == "v")


def test_every_application_role_can_do_exactly_what_the_matrix_says(pg_db: PgTestDatabase) -> None:
    columns = {r["table_name"]: r["column_name"] for r in pg_db.execute(
        "SELECT DISTINCT ON (table_name) table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'qinglong' ORDER BY table_name, ordinal_position")}
    assert set(columns) == TABLES
    can: dict[tuple[str, str], set[str]] = {}
    want: dict[tuple[str, str], set[str]] = {}
    for role in APP_ROLES:
        with open_as(pg_db, role) as conn:
            for table in sorted(TABLES):
                can[role, table] = {p for p in PROBED if _probe(conn, table, p, columns[table])}
                want[role, table] = set(PRIVILEGES[role].get(table, ()))
    assert can == want
    counts = pg_db.execute(" UNION ALL ".join(
        f"SELECT '{t}' AS t, count(*) AS n FROM {t}" for t in sorted(TABLES)))
    assert {r["t"]: r["n"] for r in counts if r["n"]} == {  # every probe rolled back
        "schema_capabilities": 1, "schema_migrations": len(MIGRATIONS)}


def test_runtime_reads_and_updates_schedules_but_never_inserts_or_deletes_them(cluster: Cluster) -> None:
    cluster.publish("t1")
    before = cluster.db.execute("SELECT * FROM trigger_schedules")
    with open_as(cluster.db, RUNTIME) as conn:
        rows = conn.execute("SELECT trigger_id FROM qinglong.trigger_schedules").fetchall()
        assert rows == [{"trigger_id": "t1"}]
        updated = conn.execute("UPDATE qinglong.trigger_schedules SET updated_at_ms = updated_at_ms "
                               "WHERE trigger_id = 't1'")
        assert updated.rowcount == 1
        assert "table trigger_schedules" in denied(conn, (
            "INSERT INTO qinglong.trigger_schedules (project_id, trigger_id, trigger_revision, "
            "state_version, claim_version, updated_at_ms) VALUES ('demo', 't1-copy', 1, 0, 0, 0)"))
        assert "table trigger_schedules" in denied(
            conn, "DELETE FROM qinglong.trigger_schedules WHERE trigger_id = 't1'")
    assert cluster.db.execute("SELECT * FROM trigger_schedules") == before


def test_worker_ingress_reads_no_task_trigger_or_schedule_table(cluster: Cluster) -> None:
    cluster.publish("t1")
    forbidden = sorted(TABLES - set(PRIVILEGES[WORKER_INGRESS]))
    assert {"triggers", "trigger_revisions", "trigger_schedules", "task_definitions"} <= set(forbidden)
    with open_as(cluster.db, WORKER_INGRESS) as conn:
        conn.execute("SELECT count(*) FROM qinglong.run_attempts")  # the schema itself is usable
        for table in forbidden:
            kind = "view" if table == "eligible_triggers" else "table"
            assert f"{kind} {table}" in denied(conn, f"SELECT * FROM qinglong.{table}")


def test_admin_reads_no_run_table(cluster: Cluster) -> None:
    cluster.publish("t1")
    with open_as(cluster.db, ADMIN) as conn:
        assert len(conn.execute("SELECT * FROM qinglong.triggers").fetchall()) == 1
        for table in ("runs", "run_attempts", "run_events"):
            kind = "view" if table == "eligible_triggers" else "table"
            assert f"{kind} {table}" in denied(conn, f"SELECT * FROM qinglong.{table}")


def test_no_application_role_deletes_or_truncates_runs(pg_db: PgTestDatabase) -> None:
    for role in APP_ROLES:
        with open_as(pg_db, role) as conn:
            assert "table runs" in denied(conn, "DELETE FROM qinglong.runs")
            assert "table runs" in denied(conn, "TRUNCATE qinglong.runs")


def test_provisioning_gives_each_role_timeouts_below_a_lease(pg_db: PgTestDatabase) -> None:
    # A plain session (no qinglong session settings) gets the role's database defaults, so a
    # frozen client is ended by the server even if it never set its own timeouts.
    expected = {
        RUNTIME: {"idle_in_transaction_session_timeout": "10s", "statement_timeout": "15s"},
        ADMIN: {"idle_in_transaction_session_timeout": "30s", "statement_timeout": "30s"},
        WORKER_INGRESS: {"idle_in_transaction_session_timeout": "10s"},
    }
    if pg_db.server.version_num >= 170000:
        expected[RUNTIME]["transaction_timeout"] = "20s"
    for role, values in expected.items():
        with psycopg.connect(pg_db.url(role)) as conn:
            for name, value in values.items():
                row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
                assert row == (value,), (role, name, row)


def test_a_role_password_is_sent_hashed_never_in_plain_text(
    pg_db: PgTestDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "correct horse battery staple"
    monkeypatch.setenv("QL_RUNTIME_PASSWORD", secret)
    sent: list[str] = []
    with rolled_back(pg_db) as conn:
        execute = conn.execute

        def recording(query: Any, params: Any = None, **kw: Any) -> Any:
            sent.append(query.as_string(conn) if isinstance(query, sql.Composable) else str(query))
            return execute(query, params, **kw)

        monkeypatch.setattr(conn, "execute", recording)
        provision_roles(conn)
        monkeypatch.setattr(conn, "execute", execute)
        stored = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", [RUNTIME]).fetchone()
    assert stored is not None and stored["rolpassword"].startswith("SCRAM-SHA-256$")
    assert any("PASSWORD 'SCRAM-SHA-256$" in statement for statement in sent)
    assert not any(secret in statement for statement in sent)


def test_public_has_nothing(pg_db: PgTestDatabase) -> None:
    granted_to_public = pg_db.execute(
        "SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, "
        "aclexplode(c.relacl) a WHERE n.nspname = 'qinglong' AND a.grantee = 0 "
        "UNION ALL SELECT 'schema' FROM pg_namespace n, aclexplode(n.nspacl) a "
        "WHERE n.nspname = 'qinglong' AND a.grantee = 0 "
        "UNION ALL SELECT 'database' FROM pg_database d, aclexplode(d.datacl) a "
        "WHERE d.datname = current_database() AND a.grantee = 0")
    assert granted_to_public == []

    probe = f"ql_probe_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    role, database = sql.Identifier(probe), sql.Identifier(pg_db.name)
    su = pg_db.superuser()
    su.execute(sql.SQL("CREATE ROLE {} LOGIN").format(role))
    try:
        with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
            psycopg.connect(pg_db.url(probe), connect_timeout=5).close()
        su.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(database, role))
        with psycopg.connect(pg_db.url(probe), autocommit=True, connect_timeout=5) as conn:
            usage = conn.execute("SELECT has_schema_privilege('qinglong', 'USAGE')").fetchone()
            assert usage == (False,)
            for table in sorted(TABLES):
                with pytest.raises(pg_errors.InsufficientPrivilege):
                    conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier("qinglong", table)))
        anything = pg_db.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'qinglong' AND c.relkind IN ('r', 'p', 'v', 'm') AND ("
            "has_table_privilege(%(r)s, c.oid, 'SELECT') OR has_table_privilege(%(r)s, c.oid, 'INSERT') "
            "OR has_table_privilege(%(r)s, c.oid, 'UPDATE') OR has_table_privilege(%(r)s, c.oid, 'DELETE') "
            "OR has_table_privilege(%(r)s, c.oid, 'TRUNCATE'))", {"r": probe})
        assert anything == []
    finally:
        su.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(database, role))
        su.execute(sql.SQL("DROP OWNED BY {}").format(role))
        su.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(role))
    assert pg_db.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [probe]) == []


# --- 7. the capability row -------------------------------------------------------------------

CAPABILITY_TAMPERING = [
    pytest.param("UPDATE schema_capabilities SET contract_version = 1", id="contract-version"),
    pytest.param("UPDATE schema_capabilities SET capabilities = capabilities - 'role_grants'",
                 id="capability-dropped"),
    pytest.param("UPDATE schema_capabilities SET capabilities = capabilities || '[\"extra\"]'",
                 id="capability-added"),
    pytest.param("UPDATE schema_capabilities SET migration_id = '0002_role_grants'",
                 id="migration-id"),
    pytest.param("INSERT INTO schema_capabilities VALUES ('someone-else', 3, '0003_lifecycle', "
                 "'[]', 0)", id="second-row"),
    pytest.param("DELETE FROM schema_capabilities", id="row-deleted"),
]


@pytest.mark.parametrize("tamper", CAPABILITY_TAMPERING)
def test_a_tampered_capability_row_is_invalid(pg_db: PgTestDatabase, tamper: str) -> None:
    pg_db.execute(tamper)
    assert audit_everyone(pg_db) == {role: ["capability-invalid"] for role in EVERYONE}


# --- 8. a read-only database --------------------------------------------------------------------


def test_a_read_only_database_is_not_a_writable_primary(pg_db: PgTestDatabase) -> None:
    pg_db.execute(f'ALTER DATABASE "{pg_db.name}" SET default_transaction_read_only = on')
    try:
        assert audit_everyone(pg_db) == {role: ["server-not-writable-primary"] for role in EVERYONE}
        before = durable_state(pg_db)  # this session predates the setting: it still writes
        with open_as(pg_db, SUPERUSER) as conn, pytest.raises(ServerNotWritable):
            migrate(conn)
        assert durable_state(pg_db) == before
    finally:
        pg_db.execute(f'ALTER DATABASE "{pg_db.name}" RESET default_transaction_read_only')
    assert audit_as(pg_db, RUNTIME) == []


# --- 9. role attributes (cluster-wide: only ever in a rolled-back transaction) ------------------

ATTRIBUTES = [
    pytest.param(RUNTIME, "CREATEDB", "createdb", id="runtime-createdb"),
    pytest.param(RUNTIME, "CREATEROLE", "createrole", id="runtime-createrole"),
    pytest.param(RUNTIME, "REPLICATION", "replication", id="runtime-replication"),
    pytest.param(RUNTIME, "BYPASSRLS", "bypassrls", id="runtime-bypassrls"),
    pytest.param(RUNTIME, "SUPERUSER", "super", id="runtime-superuser"),
    pytest.param(RUNTIME, "NOLOGIN", "nologin", id="runtime-nologin"),
    pytest.param(ADMIN, "CREATEDB", "createdb", id="admin-createdb"),
    pytest.param(WORKER_INGRESS, "BYPASSRLS", "bypassrls", id="ingress-bypassrls"),
    pytest.param(MIGRATION, "CREATEROLE", "createrole", id="migration-createrole"),
]


@pytest.mark.parametrize(("role", "attribute", "flag"), ATTRIBUTES)
def test_a_role_attribute_is_a_finding(pg_db: PgTestDatabase, role: str, attribute: str, flag: str) -> None:
    finding = f"role-attribute:{role}:{flag}"
    try:
        with rolled_back(pg_db) as conn:
            conn.execute(sql.SQL("ALTER ROLE {} " + attribute).format(sql.Identifier(role)))
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
            as_role = audit(conn)
            conn.execute("RESET ROLE")
            as_superuser = audit(conn)
    finally:
        intact = restore_role_if_changed(pg_db.server, role)
    assert intact, f"{role} was left changed (now restored)"
    assert finding in as_role, as_role
    if attribute != "SUPERUSER":  # a superuser also holds every privilege: more findings
        assert as_role == [finding]
    assert finding in as_superuser, as_superuser
    assert audit_as(pg_db, role) == []  # nobody else ever saw the change


def test_membership_in_a_superuser_role_is_a_finding(pg_db: PgTestDatabase) -> None:
    ghost_name = f"ql_ghost_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    ghost = sql.Identifier(ghost_name)
    try:
        with rolled_back(pg_db) as conn:
            conn.execute(sql.SQL("CREATE ROLE {} SUPERUSER NOLOGIN").format(ghost))
            conn.execute(sql.SQL("GRANT {} TO ql_runtime").format(ghost))
            member = conn.execute("SELECT pg_has_role('ql_runtime', %s, 'MEMBER') AS m",
                                  [ghost_name]).fetchone()
            conn.execute("SET LOCAL ROLE ql_runtime")
            as_runtime = audit(conn)
            conn.execute("RESET ROLE")
            as_superuser = audit(conn)
    finally:
        intact = restore_role_if_changed(pg_db.server, RUNTIME)
    assert intact
    assert member == {"m": True}  # ql_runtime may become a superuser
    assert any(RUNTIME in f for f in as_runtime), as_runtime
    assert any(RUNTIME in f for f in as_superuser), as_superuser


# --- 10. the CLI end to end ------------------------------------------------------------------


def ql(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m qinglong ...` with no QL_* or PG* variables (so no URL or password leaks in)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QL_", "PG"))}
    return run_ql([*args], env=env, timeout=60)


def test_ql_db_migrate_and_check_end_to_end(pg_server: PgServer) -> None:
    name = f"qlcli_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    superuser_url = pg_server.url(SUPERUSER, name)
    runtime_url = pg_server.url(RUNTIME, name)
    with pg_server.connect() as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchall() == []
    try:
        done = ql("db", "migrate", "--database-url", superuser_url)
        assert (done.returncode, done.stderr) == (0, ""), done
        assert done.stdout.splitlines() == [
            *(f"applied {m.id}" for m in MIGRATIONS), f"schema is at {MIGRATIONS[-1].id}"]

        again = ql("db", "migrate", "--database-url", superuser_url)
        assert again.returncode == 0, again
        assert again.stdout.splitlines() == [
            f"schema already at {MIGRATIONS[-1].id}; nothing to do"]

        ready = ql("db", "check", "--database-url", runtime_url)
        assert (ready.returncode, ready.stdout, ready.stderr) == (0, "ready\n", ""), ready

        with pg_server.connect(name) as conn:
            conn.execute("GRANT INSERT ON qinglong.trigger_schedules TO ql_runtime")
        drifted = ql("db", "check", "--database-url", runtime_url)
        assert drifted.returncode == 3, drifted
        assert drifted.stdout.splitlines() == ["extra-privilege:ql_runtime:trigger_schedules:INSERT"]

        with pg_server.connect(name) as conn:
            before = conn.execute("SELECT * FROM qinglong.schema_migrations ORDER BY 1").fetchall()
        refused = ql("db", "migrate", "--database-url", runtime_url)
        assert (refused.returncode, refused.stdout) == (3, ""), refused
        lines = refused.stderr.splitlines()
        assert len(lines) == 1, refused.stderr
        assert "ql_runtime" in lines[0] and "cannot migrate" in lines[0], lines
        with pg_server.connect(name) as conn:
            after = conn.execute("SELECT * FROM qinglong.schema_migrations ORDER BY 1").fetchall()
        assert after == before
    finally:
        drop_database(pg_server, name)
    with pg_server.connect() as conn:
        assert conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchall() == []
