"""Run `ql audit` against the database a URL names (one consistent, read-only snapshot)."""

from __future__ import annotations

from qinglong.audit.checker import audit
from qinglong.audit.execution import ExecutionReport, check_execution
from qinglong.audit.flows import FlowReport, check_flows
from qinglong.audit.model import AuditInput, AuditParams, AuditReport
from qinglong.audit.source import read_input
from qinglong.clock import Clock
from qinglong.storage.kernel import Tx
from qinglong.storage.open import OpenOptions, Role, open_database

FAR_FUTURE_MS = 2**62


def run_audit(url: str, clock: Clock, params: AuditParams,
              ledger: list[dict[str, object]] | None = None) -> AuditReport:
    from_ms = params.start_ms if params.start_ms is not None else 0
    to_ms = params.end_ms if params.end_ms is not None else FAR_FUTURE_MS

    def read(tx: Tx) -> tuple[AuditInput, ExecutionReport, FlowReport]:
        now_ms = tx.now_ms()
        return (read_input(tx, now_ms=now_ms, from_ms=from_ms, to_ms=to_ms),
                check_execution(tx, now_ms=now_ms, from_ms=from_ms, to_ms=to_ms,
                                stale_ms=params.execution_stale_ms),
                check_flows(tx, from_ms=from_ms, to_ms=to_ms, project_id=params.project_id))

    stores = open_database(url, clock=clock, role=Role.AUDIT,
                           options=OpenOptions(application_name="ql-audit"))
    try:
        # a role that may not read a table it judges: the error names SELECT, and the server
        # names the table
        data, execution, flows = stores.db.read("audit: reading what it judges needs SELECT", read,
                                         snapshot=True)
    finally:
        stores.close()
    report = audit(data, params, ledger)
    report.execution = execution
    report.flows = flows
    return report
