"""Run reads (inside a read transaction of the run store)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from qinglong.domain.identifiers import RUN_REF_RULE, UUID_REF, entity_id, project_id
from qinglong.domain.model import (
    LedgerCursor,
    LedgerFacts,
    LedgerMisfire,
    LedgerRevision,
    LedgerRun,
    LedgerSpan,
    LedgerTaskRevision,
    Run,
    RunDetail,
)
from qinglong.domain.runs import RunStatus
from qinglong.domain.trigger import TriggerRevision
from qinglong.errors import InvalidInput, NotFound, RecordCorrupt
from qinglong.storage import records
from qinglong.storage.kernel import Tx
from qinglong.storage.runs.params import RunListParams

MAX_LIST_LIMIT = 10_000
# The ledger reads at most this many Runs (and misfire records) of one trigger: twice the
# occurrences it computes at most (service.ledger.MAX_OCCURRENCES); a window holding more is
# refused before anything is computed.
MAX_LEDGER_ROWS = 200_000
MAX_INSTANT_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
MIN_PREFIX = 8


def run_from_row(row: Mapping[str, Any]) -> Run:
    """``records.run_from_row`` plus where the Run came from and who (or what) asked."""
    return replace(records.run_from_row(row), execution_origin=row["execution_origin"],
                   triggered_by=row["triggered_by"], requires=_requires(row.get("requires")),
                   parameters=_parameters(row.get("parameters")))


def _parameters(value: object) -> dict[str, str | int | bool]:
    if value is None:
        return {}
    return records.json_object(value, "a Run's parameters")  # type: ignore[return-value]


def _requires(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    found = json.loads(value) if isinstance(value, str) else value  # jsonb arrives decoded
    if not isinstance(found, list):
        raise RecordCorrupt("a Run's required labels are not a list")
    return tuple(str(item) for item in found)


def check_project(tx: Tx, project: str) -> None:
    """A project named by a read: a valid id of a project that exists (NotFound if not)."""
    project_id(project)
    if tx.one("project_get", {"id": project}) is None:
        raise NotFound("project", project)


class RunReader:
    def __init__(self, tx: Tx) -> None:
        self._tx = tx

    def resolve_run_id(self, run_id: str) -> str:
        """Accept a full Run id or a unique prefix of at least 8 characters."""
        run_id = run_id.lower()
        if not UUID_REF.fullmatch(run_id):
            raise InvalidInput("run", RUN_REF_RULE)
        if self._tx.one("run_get", {"run_id": run_id}) is not None:
            return run_id
        if len(run_id) < MIN_PREFIX:
            raise InvalidInput("run", f"{run_id!r}: prefix too short (at least {MIN_PREFIX} "
                                      "characters)")
        matches = self._tx.all("run_find_by_prefix", {"prefix": run_id})
        if len(matches) == 1:
            return str(matches[0]["id"])
        if len(matches) > 1:
            raise InvalidInput("run", f"{run_id!r}: prefix ambiguous (it matches more than "
                                      "one Run; give more characters)")
        raise NotFound("run", run_id)

    def run_list(self, params: RunListParams) -> list[Run]:
        return self.run_page(params, None, until="--until")

    def run_page(self, filters: RunListParams, after: tuple[int, str] | None, *,
                 until: str = "until") -> list[Run]:
        """Runs by ``filters``, newest first unless ``oldest_first``, after the Run at
        ``after`` (its time and id) when given; the time of a Run is its occurrence (or, for a
        Run of no occurrence, when it was created). ``until`` is what a refusal calls the
        upper bound (the command line's option, or the API's parameter)."""
        if not 1 <= filters.limit <= MAX_LIST_LIMIT:
            raise InvalidInput("limit", f"must be between 1 and {MAX_LIST_LIMIT}")
        if filters.trigger_id is not None:
            entity_id(filters.trigger_id, "trigger")
        if filters.task_id is not None:
            entity_id(filters.task_id, "task")
        if filters.status is not None and filters.status not in {s.value for s in RunStatus}:
            raise InvalidInput("status", "must be one of " + ", ".join(s.value for s in RunStatus))
        if (filters.since_ms is not None and filters.until_ms is not None
                and filters.since_ms > filters.until_ms):
            raise InvalidInput("since", f"must not be after {until}")
        if filters.project_id is not None:
            check_project(self._tx, filters.project_id)
        after_ms, after_id = after if after is not None else (None, None)
        query = "run_page_oldest_first" if filters.oldest_first else "run_page_newest_first"
        rows = self._tx.all(query, {
            "project_id": filters.project_id, "task_id": filters.task_id,
            "trigger_id": filters.trigger_id, "status": filters.status,
            "since_ms": filters.since_ms, "until_ms": filters.until_ms, "limit": filters.limit,
            "after_ms": after_ms, "after_id": after_id,
            "projects": None if filters.projects is None else json.dumps(filters.projects)})
        return [run_from_row(row) for row in rows]

    def run_get(self, run_id: str) -> RunDetail:
        full_id = self.resolve_run_id(run_id)
        run = self._tx.one("run_get", {"run_id": full_id})
        if run is None:  # deleted by retention since it was found
            raise NotFound("run", run_id)
        attempts = self._tx.all("attempt_list_for_run", {"run_id": full_id})
        events = self._tx.all("event_list_for_run", {"run_id": full_id})
        return RunDetail(
            run=run_from_row(run),
            attempts=tuple(records.attempt_from_row(row) for row in attempts),
            events=tuple(records.event_from_row(row) for row in events),
        )

    def trigger_ledger_facts(self, project: str, trigger: str, from_ms: int, to_ms: int, *,
                             now_ms: int) -> LedgerFacts:
        """What decides the fate of a trigger's occurrences in ``[from_ms, to_ms]`` (see
        LedgerFacts); run inside one read transaction. NotFound for an unknown project or
        trigger (a deleted trigger is read like any other)."""
        project_id(project)
        entity_id(trigger, "trigger")
        for name, value in (("from", from_ms), ("to", to_ms)):
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_INSTANT_MS:
                raise InvalidInput(name, "must be an instant between 1970 and 9999")
        if from_ms > to_ms:
            raise InvalidInput("from", "must not be after --to")
        if self._tx.one("project_get", {"id": project}) is None:
            raise NotFound("project", project)
        key = {"project_id": project, "trigger_id": trigger}
        head = self._tx.one("ledger_trigger_get", key)
        if head is None:
            raise NotFound("trigger", trigger)
        window = {**key, "from_ms": from_ms, "to_ms": to_ms, "limit": MAX_LEDGER_ROWS + 1}
        # the cursor first: whatever is decided while the rest is read lies behind it
        schedule = self._tx.one("ledger_schedule", key)
        revisions = tuple(_ledger_revision(records.trigger_revision(row)) for row in
                          self._tx.all("ledger_trigger_revisions", key))
        tasks = tuple(
            LedgerTaskRevision(revision=int(row["revision"]), enabled=bool(row["enabled"]),
                               published_at_ms=int(row["created_at_ms"]))
            for row in self._tx.all("ledger_task_revisions",
                                          {"project_id": project,
                                           "task_id": head["task_id"]}))
        runs = self._tx.all("ledger_runs", window)
        misfires = self._tx.all("ledger_misfires", window)
        if len(runs) > MAX_LEDGER_ROWS or len(misfires) > MAX_LEDGER_ROWS:
            raise InvalidInput("from", f"the window holds more than {MAX_LEDGER_ROWS:,} Runs or "
                                       "misfire records of this trigger: choose a narrower "
                                       "window (--from, --to)")
        pauses = self._tx.all("ledger_pauses", key)
        archivals = self._tx.all("ledger_archivals", key)
        return LedgerFacts(
            project_id=project, trigger_id=trigger, from_ms=from_ms, to_ms=to_ms, now_ms=now_ms,
            revisions=revisions,
            task_revisions=tasks,
            runs=tuple(LedgerRun(id=str(row["id"]), scheduled_for_ms=int(row["scheduled_for_ms"]),
                                 status=str(row["status"]), trigger_type=str(row["trigger_type"]),
                                 trigger_revision=records.optional_int(row["trigger_revision"]))
                       for row in runs),
            misfires=tuple(LedgerMisfire(trigger_revision=int(row["trigger_revision"]),
                                         due_at_ms=int(row["due_at_ms"]),
                                         skipped_through_ms=int(row["skipped_through_ms"]),
                                         policy=str(row["policy"]),
                                         decided_at_ms=int(row["decided_at_ms"]))
                           for row in misfires),
            pauses=tuple(LedgerSpan(from_ms=int(row["paused_at_ms"]),
                                    until_ms=records.optional_int(row["ended_at_ms"]))
                         for row in pauses),
            archivals=tuple(LedgerSpan(from_ms=int(row["archived_at_ms"]),
                                       until_ms=records.optional_int(row["restored_at_ms"]))
                            for row in archivals),
            cursor=None if schedule is None else LedgerCursor(
                trigger_revision=int(schedule["trigger_revision"]),
                next_fire_at_ms=records.optional_int(schedule["next_fire_at_ms"])),
        )


def _ledger_revision(revision: TriggerRevision) -> LedgerRevision:
    spec = revision.spec
    return LedgerRevision(revision=revision.revision, enabled=revision.enabled,
                          published_at_ms=revision.created_at_ms, expression=spec.expression,
                          timezone=spec.timezone, misfire_policy=spec.misfire_policy.value,
                          task_revision=revision.task_revision, spec=spec)
