"""Flow rows read back as domain values: a revision is digest-checked (a row changed behind
the store's back is RecordCorrupt), a flow run comes with its steps."""

from __future__ import annotations

import json
from collections.abc import Sequence

from qinglong.domain.flow import FlowRevision, pins_from_content, spec_from_content
from qinglong.domain.flow_progress import FlowStatus, NodeState
from qinglong.domain.flow_runs import FlowRun, FlowStep
from qinglong.errors import InvalidInput, RecordCorrupt
from qinglong.storage.dbapi import Row


def _json(value: object, what: str) -> dict[str, object]:
    if isinstance(value, dict):
        return value
    if not isinstance(value, str):
        raise RecordCorrupt(f"{what} is not JSON text")
    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise RecordCorrupt(f"{what} is not valid JSON") from exc
    if not isinstance(parsed, dict):
        raise RecordCorrupt(f"{what} is not a JSON object")
    return parsed


def flow_revision(row: Row) -> FlowRevision:
    where = f"flow {row['project_id']}/{row['flow_id']}@{row['revision']}"
    try:
        spec = spec_from_content(_json(row["spec_json"], where))
        pins = pins_from_content(_json(row["pins_json"], where))
    except (InvalidInput, KeyError, ValueError, TypeError) as exc:
        raise RecordCorrupt(f"{where} does not hold a valid flow: {exc}") from exc
    revision = FlowRevision(project_id=row["project_id"], flow_id=row["flow_id"],
                            revision=int(row["revision"]), name=row["name"], spec=spec,
                            pins=pins, content_digest=str(row["content_digest"]).strip(),
                            created_at_ms=int(row["created_at_ms"]))
    if revision.expected_digest() != revision.content_digest:
        raise RecordCorrupt(f"{where} does not match its content digest")
    return revision


def flow_step(row: Row) -> FlowStep:
    return FlowStep(node_id=row["node_id"], state=NodeState(row["status"]), run_id=row["run_id"],
                    run_status=row["run_status"], cancel_requested=bool(row["cancel_requested"]),
                    released_at_ms=row["released_at_ms"], ended_at_ms=row["ended_at_ms"],
                    error=row["error_summary"])


def flow_run(row: Row, steps: Sequence[Row] = ()) -> FlowRun:
    parameters = _json(row["parameters"], f"flow run {row['id']}") if row["parameters"] else {}
    return FlowRun(id=row["id"], project_id=row["project_id"], flow_id=row["flow_id"],
                   flow_revision=int(row["flow_revision"]), status=FlowStatus(row["status"]),
                   ended_reason=row["ended_reason"], request_key=row["idempotency_key"],
                   requested_by=row["requested_by"], parameters=parameters,
                   created_at_ms=int(row["created_at_ms"]), deadline_at_ms=row["deadline_at_ms"],
                   finished_at_ms=row["finished_at_ms"], trigger_id=row["trigger_id"],
                   scheduled_for_ms=row["scheduled_for_ms"],
                   steps=tuple(flow_step(s) for s in steps))
