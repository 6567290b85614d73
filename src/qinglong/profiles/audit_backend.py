"""Run `ql audit` against the database a URL names (one consistent, read-only snapshot)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from qinglong.audit.checker import audit
from qinglong.audit.execution import ExecutionReport, check_execution
from qinglong.audit.model import AuditInput, AuditParams, AuditReport
from qinglong.audit.source import read_input
from qinglong.clock import Clock
from qinglong.profiles.backends import url_kind

FAR_FUTURE_MS = 2**62


@contextlib.contextmanager
def _snapshot_input(url: str, clock: Clock,
                    params: AuditParams) -> Iterator[tuple[AuditInput, ExecutionReport]]:
    from_ms = params.start_ms if params.start_ms is not None else 0
    to_ms = params.end_ms if params.end_ms is not None else FAR_FUTURE_MS
    if url_kind(url) == "sqlite":
        from qinglong.storage.sqlite.connection import QUERIES, SqliteDatabase, sqlite_path_from_url
        from qinglong.storage.sqlite.migrate import check_schema

        db = SqliteDatabase(sqlite_path_from_url(url))
        try:
            check_schema(db)
            with db.read("audit") as conn:
                now_ms = clock.now_ms()
                yield (read_input(conn, QUERIES, dialect="sqlite", now_ms=now_ms,
                                  from_ms=from_ms, to_ms=to_ms),
                       check_execution(conn, QUERIES, now_ms=now_ms, from_ms=from_ms,
                                       to_ms=to_ms, stale_ms=params.execution_stale_ms))
        finally:
            db.close()
        return
    from qinglong.errors import NotReady
    from qinglong.storage.postgres.connection import QUERIES as PG_QUERIES
    from qinglong.storage.postgres.connection import connect
    from qinglong.storage.postgres.readiness import schema_findings

    pg = connect(url, application_name="ql-audit")
    try:
        findings = schema_findings(pg)
        if findings:
            raise NotReady(findings)
        pg.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        now = pg.execute(PG_QUERIES["audit_now"]).fetchone()
        assert now is not None
        yield (read_input(pg, PG_QUERIES, dialect="postgresql", now_ms=int(now["now_ms"]),
                          from_ms=from_ms, to_ms=to_ms),
               check_execution(pg, PG_QUERIES, now_ms=int(now["now_ms"]), from_ms=from_ms,
                               to_ms=to_ms, stale_ms=params.execution_stale_ms))
        pg.execute("COMMIT")
    finally:
        pg.close()


def run_audit(url: str, clock: Clock, params: AuditParams,
              ledger: list[dict[str, object]] | None = None) -> AuditReport:
    with _snapshot_input(url, clock, params) as (data, execution):
        report = audit(data, params, ledger)
    report.execution = execution
    return report
