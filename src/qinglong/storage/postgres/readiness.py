"""The readiness audit: short, low-sensitivity findings; an empty list means ready.

Checks, in order: the server is a supported, writable primary; the migration ledger and
checksums are exact; the capability row is exact; the connecting role's privileges match
the matrix exactly (one too many fails like one too few) and it owns nothing.

A process that must run as one role (`ql control` as ql_runtime, `ql worker` as ql_worker)
passes ``expected``: connecting as any other role is the finding
``wrong-role:<role>:connect-as:<expected>``, and the role's privileges are compared with the
expected role's matrix, so a role that could do more or less than that process needs is
never ready for it.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg

from qinglong.errors import AlreadyRunning, NotReady, QinglongError
from qinglong.storage.migrations import audit_history, pending
from qinglong.storage.postgres.connection import QUERIES, PgConnection
from qinglong.storage.postgres.errors import translate
from qinglong.storage.postgres.migrate import MIGRATIONS, history
from qinglong.storage.postgres.roles import APP_ROLES, MIGRATION, PRIVILEGES, ROLES

SUPPORTED_MAJORS = range(15, 19)
CONTRACT_NAME = "qinglong-control"
CAPABILITY = {
    "contract_name": CONTRACT_NAME,
    # 0006_notifications and 0007_jitter leave the row as it is; 0008_accounts adds one
    "contract_version": 6,
    "migration_id": "0008_accounts",
    "capabilities": ["definitions", "run_core", "cluster_scheduler_admission", "role_grants",
                     "attempt_leases", "workers", "pauses", "accounts"],
}
_PRIVILEGE_COLUMNS = {
    "SELECT": "can_select", "INSERT": "can_insert", "UPDATE": "can_update", "DELETE": "can_delete",
    "TRUNCATE": "can_truncate", "REFERENCES": "can_references", "TRIGGER": "can_trigger",
    "MAINTAIN": "can_maintain",
}


def server_findings(conn: PgConnection) -> tuple[list[str], dict[str, Any]]:
    facts = conn.execute(QUERIES["server_facts"]).fetchone()
    assert facts is not None
    findings = []
    major = int(facts["version_num"]) // 10000
    if major not in SUPPORTED_MAJORS:
        findings.append(f"server-version-unsupported:{major}")
    if facts["in_recovery"] or facts["transaction_read_only"] == "on" or facts["default_read_only"] == "on":
        findings.append("server-not-writable-primary")
    return findings, dict(facts)


def schema_findings(conn: PgConnection) -> list[str]:
    done = history(conn)
    if not done:
        return ["schema-missing"]
    findings = audit_history(done, MIGRATIONS)
    findings += [f"missing-migration:{m.id}" for m in pending(done, MIGRATIONS)]
    if findings:
        return findings
    rows = conn.execute(QUERIES["capability_get"]).fetchall()
    if len(rows) != 1:
        return ["capability-invalid"]
    row = dict(rows[0])
    capabilities = row["capabilities"]
    if isinstance(capabilities, str):
        capabilities = json.loads(capabilities)
    row["capabilities"] = capabilities
    if row != CAPABILITY:
        return ["capability-invalid"]
    return []


def role_findings(conn: PgConnection, role: str, matrix: str | None = None) -> list[str]:
    """``role``'s attributes, memberships and privileges, compared with the matrix of
    ``matrix`` (default: its own)."""
    attributes = conn.execute(QUERIES["role_attributes"], {"roles": [role]}).fetchone()
    if attributes is None:
        return [f"role-missing:{role}"]
    findings = [
        f"role-attribute:{role}:{flag.removeprefix('rol')}"
        for flag in ("rolsuper", "rolcreatedb", "rolcreaterole", "rolreplication", "rolbypassrls")
        if attributes[flag]
    ]
    if not attributes["rolcanlogin"]:
        findings.append(f"role-attribute:{role}:nologin")
    findings += [f"role-member-of:{role}:{r['parent']}"
                 for r in conn.execute(QUERIES["role_memberships"], {"role": role})]
    schema = conn.execute(QUERIES["schema_privileges"], {"role": role}).fetchone()
    assert schema is not None
    if not schema["can_connect"]:
        findings.append(f"missing-privilege:{role}:database:CONNECT")
    if (matrix or role) == MIGRATION:
        return findings
    if not schema["can_use"]:
        findings.append(f"missing-privilege:{role}:schema:USAGE")
    if schema["can_create"]:
        findings.append(f"extra-privilege:{role}:schema:CREATE")
    if schema["can_create_in_database"]:
        findings.append(f"extra-privilege:{role}:database:CREATE")
    if schema["can_temp"]:
        findings.append(f"extra-privilege:{role}:database:TEMPORARY")
    owners = {r["table_name"]: r["owner"] for r in conn.execute(QUERIES["schema_tables"])}
    expected = PRIVILEGES[matrix or role]
    findings += [f"missing-table:{name}" for name in sorted(set(expected) - set(owners))]
    for row in conn.execute(QUERIES["table_privileges"], {"role": role}):
        table = row["table_name"]
        if owners.get(table) == role:
            findings.append(f"owns-table:{role}:{table}")
        have = {name for name, column in _PRIVILEGE_COLUMNS.items() if row[column]}
        want = expected.get(table, frozenset())
        findings += [f"extra-privilege:{role}:{table}:{p}" for p in sorted(have - want)]
        findings += [f"missing-privilege:{role}:{table}:{p}" for p in sorted(want - have)]
    return findings


def ownership_findings(conn: PgConnection) -> list[str]:
    return [f"table-owner:{r['table_name']}:{r['owner']}"
            for r in conn.execute(QUERIES["schema_tables"]) if r["owner"] != MIGRATION]


def _readable(conn: PgConnection, who: str) -> list[str]:
    """Why the connecting role cannot read the ledger and capability row (empty: it can)."""
    access = conn.execute(QUERIES["schema_privileges"], {"role": who}).fetchone()
    assert access is not None
    problems = []
    if not access["can_use"]:
        problems.append(f"missing-privilege:{who}:schema:USAGE")
    if not access["can_read_ledger"]:
        problems.append(f"missing-privilege:{who}:schema_migrations:SELECT")
    if not access["can_read_capabilities"]:
        problems.append(f"missing-privilege:{who}:schema_capabilities:SELECT")
    return problems


def audit(conn: PgConnection, *, role: str | None = None,
          expected: str | None = None) -> list[str]:
    """Readiness findings for the connecting role (or ``role``), sorted; with ``expected``,
    for a process that must connect as that role (see the module's docstring)."""
    findings, facts = server_findings(conn)
    present = conn.execute(QUERIES["schema_exists"]).fetchone()
    if not present or not present["present"]:
        return sorted({*findings, "schema-missing"})
    unreadable = [] if facts["is_superuser"] else _readable(conn, facts["role_name"])
    findings += unreadable if unreadable else schema_findings(conn)
    who = role or facts["role_name"]
    if expected is not None and who != expected:
        findings.append(wrong_role_finding(who, expected))
        findings += role_findings(conn, who, matrix=expected)
    elif who in APP_ROLES:
        findings += role_findings(conn, who)
    elif who == MIGRATION:
        findings += role_findings(conn, who) + ownership_findings(conn)
    elif facts["is_superuser"]:
        findings += ownership_findings(conn)
        for each in ROLES:
            findings += role_findings(conn, each)
    else:
        findings.append(f"unknown-role:{who}")
    return sorted(set(findings))


def wrong_role_finding(who: str, expected: str) -> str:
    return f"wrong-role:{who}:connect-as:{expected}"


def wrong_role(findings: list[str] | tuple[str, ...]) -> tuple[str, str] | None:
    """(the role connected as, the role to connect as) when the findings say the process
    connected as the wrong role."""
    for finding in findings:
        kind, _, rest = finding.partition(":")
        if kind == "wrong-role":
            who, _, expected = rest.partition(":connect-as:")
            return who, expected
    return None


def wrong_role_refusal(findings: list[str], command: str) -> NotReady | None:
    """The error for a process connected as the wrong role (None when it is not): a
    configuration mistake that waiting does not mend, so the process refuses to start."""
    wrong = wrong_role(findings)
    if wrong is None:
        return None
    who, expected = wrong
    differences = [f for f in findings if f.startswith(("missing-privilege:", "extra-privilege:",
                                                        "role-attribute:"))]
    shown = ", ".join(differences[:4]) + (f" and {len(differences) - 4} more"
                                          if len(differences) > 4 else "")
    detail = f": its privileges are not {expected}'s ({shown})" if differences else ""
    return NotReady(findings, f"`{command}` must connect as {expected}, not {who}; give it a "
                              f"URL for {expected}{detail}")


def refuses_start(exc: QinglongError) -> bool:
    """An activation failure that trying again does not mend: the process connects as the
    wrong role (exit 3), or its id is held by a live process (exit 4)."""
    return isinstance(exc, AlreadyRunning) or (
        isinstance(exc, NotReady) and wrong_role(exc.findings) is not None)


def _milliseconds(setting: str) -> int:
    """A PostgreSQL duration setting ("10s", "2500ms", "0") in milliseconds."""
    units = {"ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
    for unit in sorted(units, key=len, reverse=True):
        if setting.endswith(unit):
            return int(float(setting[: -len(unit)]) * units[unit])
    return int(setting or 0)


def session_findings(conn: PgConnection, lease_ms: int) -> list[str]:
    """The session's transaction timeouts must end a frozen holder's row lock before its
    lease runs out; 0 (disabled) counts as too long."""
    row = conn.execute(QUERIES["session_timeouts"]).fetchone()
    assert row is not None
    findings = []
    idle = _milliseconds(row["idle_in_transaction"])
    if not 0 < idle < lease_ms:
        findings.append("idle-in-transaction-timeout-not-below-lease")
    if row["transaction_timeout"]:
        transaction = _milliseconds(row["transaction_timeout"])
        if not 0 < transaction < lease_ms:
            findings.append("transaction-timeout-not-below-lease")
    return findings


def corrupt_runs(conn: PgConnection, limit: int = 16) -> list[str]:
    """Findings for Runs in a shape no lifecycle step can produce (they block activation)."""
    try:
        rows = conn.execute(QUERIES["lifecycle_corrupt"], {"limit": limit}).fetchall()
    except psycopg.Error as exc:
        raise translate(exc, "check run shapes", conn) from exc
    return [f"run-corrupt:{row['run_id']}:{row['status']}:{row['problem']}" for row in rows]
