"""The four database roles and what each may do: provisioning and the exact privilege matrix.

Roles are cluster-wide and created outside the migration stream by a superuser (or a role
that may create roles). Passwords, when used, come from the environment or a file:
``QL_<ROLE>_PASSWORD_FILE`` or ``QL_<ROLE>_PASSWORD`` (e.g. ``QL_RUNTIME_PASSWORD_FILE``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from psycopg import errors as pg_errors
from psycopg import sql

from qinglong.errors import InvalidInput

if TYPE_CHECKING:  # (connection.py translates errors, which name the roles below)
    from qinglong.storage.postgres.connection import PgConnection

MIGRATION = "ql_migration"
ADMIN = "ql_admin"
RUNTIME = "ql_runtime"
WORKER_INGRESS = "ql_worker_ingress"
WORKER = "ql_worker"
WEB = "ql_web"
ROLES = (MIGRATION, ADMIN, RUNTIME, WORKER_INGRESS, WORKER, WEB)
APP_ROLES = (ADMIN, RUNTIME, WORKER_INGRESS, WORKER, WEB)

S, I, U, D = "SELECT", "INSERT", "UPDATE", "DELETE"


# What every application role reads: which migrations and capabilities the schema has.
_SCHEMA_FACTS = {
    "schema_migrations": frozenset({S}),
    "schema_capabilities": frozenset({S}),
}
# Publishing definitions (ql_admin, and ql_web for the HTTP API): heads, their immutable
# revisions, schedule rows, archivals and pauses.
_PUBLISHING = {
    "projects": frozenset({S, I, U}),
    "task_definitions": frozenset({S, I, U}),
    "triggers": frozenset({S, I, U}),
    "trigger_schedules": frozenset({S, I, U}),
    "task_definition_revisions": frozenset({S, I}),
    "task_execution_revisions": frozenset({S, I}),
    "trigger_revisions": frozenset({S, I}),
    "project_archivals": frozenset({S, I, U}),
    "trigger_pauses": frozenset({S, I, U}),
    "flows": frozenset({S, I, U}),  # 0016_flows
    "flow_revisions": frozenset({S, I}),
    "scripts": frozenset({S, I, U}),  # 0019_scripts
    "script_revisions": frozenset({S, I}),
    "script_blobs": frozenset({S, I}),
    "repos": frozenset({S, I, U}),  # 0022_repos
    "dep_set_revisions": frozenset({S, I}),  # 0023_deps: appended, never changed
}
# Starting, cancelling and moving flow runs on (ql_runtime, ql_web): a flow run and the step
# row of each of its nodes (0016_flows).
_FLOW_RUNS = {
    "flow_runs": frozenset({S, I, U}),
    "flow_steps": frozenset({S, I, U}),
}
# Project environments and the key of their secrets (ql_admin, ql_web; 0021_project_env):
# revisions are appended, never changed; entries and the keyring are UPDATEd only when
# `ql secret rotate-key` seals them again.
_PROJECT_ENV = {
    "project_env_revisions": frozenset({S, I}),
    "project_env_entries": frozenset({S, I, U}),
    "secret_keyring": frozenset({S, I, U}),
}
# Managing notification channels and rules (ql_admin, ql_web).
_NOTIFY_SETTINGS = {
    "notify_channels": frozenset({S, I, U}),  # removed ones are kept, secret erased
    "notify_rules": frozenset({S, I, U, D}),  # U: a rule's unplaceable delay (0017_unplaceable)
}

# Labels on tasks and triggers (ql_admin for `ql label`, ql_web for the API; 0027_labels): a
# set is replaced by deleting and inserting rows.
_LABELS = {
    "task_labels": frozenset({S, I, D}),
    "trigger_labels": frozenset({S, I, D}),
}

# The exact privileges of each application role on every table of the schema;
# a table missing from a role's map means no privilege at all.
PRIVILEGES: dict[str, dict[str, frozenset[str]]] = {
    ADMIN: {
        **_SCHEMA_FACTS,
        **_PUBLISHING,
        **_NOTIFY_SETTINGS,
        **_PROJECT_ENV,
        "audit_log": frozenset({I}),  # what `ql env` and `ql secret` change (0021)
        "instances": frozenset({S}),
        **_LABELS,
        "concurrency_limits": frozenset({S, I, U, D}),
    },
    RUNTIME: {
        **_SCHEMA_FACTS,
        "projects": frozenset({S}),
        "task_definitions": frozenset({S}),
        "task_definition_revisions": frozenset({S}),
        "task_execution_revisions": frozenset({S}),
        "triggers": frozenset({S}),
        "trigger_revisions": frozenset({S}),
        "trigger_schedules": frozenset({S, U}),
        "eligible_triggers": frozenset({S}),  # the view the claim and the commit ask (0012)
        # retention deletes claim records and the events of ended Runs past its horizon,
        # and records that horizon (0010_retention)
        "trigger_schedule_claims": frozenset({S, I, D}),
        "trigger_schedule_misfires": frozenset({S, I}),
        "run_events": frozenset({S, I, D}),
        "retention_marks": frozenset({S, I, U}),
        "runs": frozenset({S, I, U}),
        "run_attempts": frozenset({S, I, U}),
        "instances": frozenset({S, I, U}),
        "project_archivals": frozenset({S}),
        "run_log_chunks": frozenset({S, D}),
        "concurrency_limits": frozenset({S}),
        "trigger_pauses": frozenset({S}),
        "task_labels": frozenset({S}),  # what `ql task|trigger list` show (0032_runtime_labels)
        "trigger_labels": frozenset({S}),
        # the notification dispatcher of every replica: reads channels and rules, runs the
        # outbox (purging what is past retention), its scan cursors and recovery watches
        "notify_channels": frozenset({S}),
        "notify_rules": frozenset({S}),
        "notify_outbox": frozenset({S, I, U, D}),
        "notify_cursors": frozenset({S, I, U}),
        "notify_recoveries": frozenset({S, I, U, D}),
        "flows": frozenset({S}),
        "flow_revisions": frozenset({S}),
        "repos": frozenset({S}),  # ql repo pull admits a pull as ql task run does (0022)
        **_FLOW_RUNS,
        "project_env_revisions": frozenset({S}),  # as a lease reads them (0021_project_env)
        "project_env_entries": frozenset({S}),
    },
    WORKER_INGRESS: {
        **_SCHEMA_FACTS,
        "run_attempts": frozenset({S}),
    },
    # ql_worker runs what the scheduler admitted: it reads the execution plan it is leased,
    # moves Runs and Attempts through their steps, appends events and log chunks. Ending a
    # flow's Run, it admits the Runs of the nodes that Run releases (0016_flows): it reads the
    # flow's revision, moves the flow run and its steps, and inserts Runs and Attempts.
    WORKER: {
        **_SCHEMA_FACTS,
        "task_execution_revisions": frozenset({S}),
        "script_blobs": frozenset({S}),  # the script a plan pins, by its digest (0019_scripts)
        "dep_set_revisions": frozenset({S}),  # a script's project's dependencies (0023_deps)
        # the project environment a lease carries (secrets sealed: 0021_project_env)
        "project_env_revisions": frozenset({S}),
        "project_env_entries": frozenset({S}),
        "concurrency_limits": frozenset({S}),
        "runs": frozenset({S, I, U}),
        "run_attempts": frozenset({S, I, U}),
        "flow_revisions": frozenset({S}),
        "flow_runs": frozenset({S, U}),
        "flow_steps": frozenset({S, U}),
        "run_events": frozenset({S, I}),
        "run_log_chunks": frozenset({S, I, D}),
        "instances": frozenset({S, I, U}),
    },
    # ql_web serves the HTTP API (`ql web`): it publishes as ql_admin does, admits run-now
    # and backfilled Runs and cancels as ql_runtime does, reads Runs, logs and the ledger,
    # keeps the accounts, manages notification channels and rules as ql_admin does, lists the
    # outbox and retries a dead delivery (0009_web_controls).
    WEB: {
        **_SCHEMA_FACTS,
        **_PUBLISHING,
        **_NOTIFY_SETTINGS,
        **_PROJECT_ENV,
        "runs": frozenset({S, I, U}),
        "run_attempts": frozenset({S, I, U}),
        "run_events": frozenset({S, I}),
        "run_log_chunks": frozenset({S}),
        "trigger_schedule_misfires": frozenset({S}),
        "instances": frozenset({S, I, U}),
        "users": frozenset({S, I, U}),
        "user_sessions": frozenset({S, I, U}),
        "api_tokens": frozenset({S, I, U}),
        "login_failures": frozenset({S, I, D}),
        "login_devices": frozenset({S, I, D}),  # 0011_login_devices
        "oidc_pending_logins": frozenset({S, I, D}),  # 0026_oidc: single sign-on
        "oidc_identities": frozenset({S, I, U}),
        "audit_log": frozenset({S, I}),
        "user_second_factors": frozenset({S, I, U, D}),  # 0025_totp: removed when off
        "user_recovery_codes": frozenset({S, I, U, D}),
        "user_grants": frozenset({S, I, U, D}),  # 0024_grants: a removed grant is deleted
        "concurrency_limits": frozenset({S, I, U, D}),  # the global limit (0031_web_limits)
        **_LABELS,
        "user_pins": frozenset({S, I, D}),  # 0028_pins: a user's own, through /api/v1/me
        "saved_filters": frozenset({S, I, U, D}),
        "notify_outbox": frozenset({S, U}),  # listed; a dead delivery made pending again
        **_FLOW_RUNS,
    },
}

# Role defaults installed by provisioning; `ql control` also sets its own session values
# below its lease.
ROLE_SETTINGS: dict[str, dict[str, str]] = {
    RUNTIME: {"idle_in_transaction_session_timeout": "10s", "statement_timeout": "15s"},
    ADMIN: {"idle_in_transaction_session_timeout": "30s", "statement_timeout": "30s"},
    WORKER_INGRESS: {"idle_in_transaction_session_timeout": "10s"},
    WORKER: {"idle_in_transaction_session_timeout": "10s", "statement_timeout": "15s"},
    WEB: {"idle_in_transaction_session_timeout": "10s", "statement_timeout": "15s"},
}
ROLE_SETTINGS_PG17: dict[str, dict[str, str]] = {RUNTIME: {"transaction_timeout": "20s"}}


def role_password(role: str) -> str | None:
    short = role.removeprefix("ql_").upper()
    path = os.environ.get(f"QL_{short}_PASSWORD_FILE")
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").rstrip("\n")
        except OSError as exc:
            raise InvalidInput(f"QL_{short}_PASSWORD_FILE", f"cannot read ({exc.strerror})") from exc
    return os.environ.get(f"QL_{short}_PASSWORD")


def provision_roles(conn: PgConnection) -> list[str]:
    """Create missing roles and give them database access and safe defaults (idempotent).

    Needs a superuser connection. Returns the roles it created.
    """
    created = []
    database = conn.execute("SELECT current_database() AS db").fetchone()
    assert database is not None
    db_name = database["db"]
    existing = {r["rolname"] for r in conn.execute(
        "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s)", [list(ROLES)])}
    for role in ROLES:
        if role not in existing:
            try:
                conn.execute(sql.SQL(
                    "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION "
                    "NOBYPASSRLS").format(sql.Identifier(role)))
                created.append(role)
            except (pg_errors.DuplicateObject, pg_errors.UniqueViolation):
                pass  # a concurrent provisioning (another migrate) created it a moment ago
        password = role_password(role)
        if password is not None:
            # Hashed here (SCRAM-SHA-256), so the plain text never reaches the server or its logs.
            verifier = conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")
            conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(verifier.decode())))
    db = sql.Identifier(db_name)
    conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(db))
    conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
        db, sql.SQL(", ").join(sql.Identifier(r) for r in ROLES)))
    conn.execute(sql.SQL("GRANT CREATE ON DATABASE {} TO {}").format(db, sql.Identifier(MIGRATION)))
    settings = {role: dict(values) for role, values in ROLE_SETTINGS.items()}
    if conn.info.server_version >= 170000:
        for role, values in ROLE_SETTINGS_PG17.items():
            settings.setdefault(role, {}).update(values)
    for role, values in settings.items():
        for name, value in values.items():
            conn.execute(sql.SQL("ALTER ROLE {} IN DATABASE {} SET {} = {}").format(
                sql.Identifier(role), db, sql.Identifier(name), sql.Literal(value)))
    return created
