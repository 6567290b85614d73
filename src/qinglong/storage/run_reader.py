"""Run reads shared by both adapters (queries by name)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.model import Run, RunDetail
from qinglong.domain.runs import RunStatus
from qinglong.errors import InvalidInput, NotFound
from qinglong.storage import records
from qinglong.storage.dbapi import Connection, Queries
from qinglong.storage.ports import RunListParams

MAX_LIST_LIMIT = 10_000
MIN_PREFIX = 8
RUN_ID_CHARS = re.compile(r"[0-9a-f-]{1,36}")


def run_from_row(row: Mapping[str, Any]) -> Run:
    """``records.run_from_row`` plus where the Run came from and who (or what) asked."""
    return replace(records.run_from_row(row), execution_origin=row["execution_origin"],
                   triggered_by=row["triggered_by"])


class RunReader:
    def __init__(self, conn: Connection, queries: Queries) -> None:
        self._conn = conn
        self._q = queries

    def resolve_run_id(self, run_id: str) -> str:
        """Accept a full Run id or a unique prefix of at least 8 characters."""
        run_id = run_id.lower()
        if not RUN_ID_CHARS.fullmatch(run_id):
            raise InvalidInput("run", "must be a Run id (a UUID) or a prefix of 8 or more of its characters")
        if self._conn.execute(self._q["run_get"], {"run_id": run_id}).fetchone() is not None:
            return run_id
        if len(run_id) >= MIN_PREFIX:
            matches = self._conn.execute(self._q["run_find_by_prefix"], {"prefix": run_id}).fetchall()
            if len(matches) == 1:
                return str(matches[0]["id"])
            if len(matches) > 1:
                raise InvalidInput("run", f"prefix {run_id!r} matches more than one Run")
        raise NotFound("run", run_id)

    def run_list(self, params: RunListParams) -> list[Run]:
        if not 1 <= params.limit <= MAX_LIST_LIMIT:
            raise InvalidInput("limit", f"must be between 1 and {MAX_LIST_LIMIT}")
        if params.trigger_id is not None:
            entity_id(params.trigger_id, "trigger")
        if params.task_id is not None:
            entity_id(params.task_id, "task")
        if params.status is not None and params.status not in {s.value for s in RunStatus}:
            raise InvalidInput("status", "must be one of " + ", ".join(s.value for s in RunStatus))
        if (params.since_ms is not None and params.until_ms is not None
                and params.since_ms > params.until_ms):
            raise InvalidInput("since", "must not be after --until")
        if params.project_id is not None:
            project_id(params.project_id)
            if self._conn.execute(self._q["project_get"], {"id": params.project_id}).fetchone() is None:
                raise NotFound("project", params.project_id)
        rows = self._conn.execute(
            self._q["run_list"],
            {
                "project_id": params.project_id,
                "task_id": params.task_id,
                "trigger_id": params.trigger_id,
                "status": params.status,
                "since_ms": params.since_ms,
                "until_ms": params.until_ms,
                "limit": params.limit,
                "oldest_first": params.oldest_first,
            },
        ).fetchall()
        return [run_from_row(row) for row in rows]

    def run_get(self, run_id: str) -> RunDetail:
        full_id = self.resolve_run_id(run_id)
        run = self._conn.execute(self._q["run_get"], {"run_id": full_id}).fetchone()
        attempts = self._conn.execute(self._q["attempt_list_for_run"], {"run_id": full_id}).fetchall()
        events = self._conn.execute(self._q["event_list_for_run"], {"run_id": full_id}).fetchall()
        return RunDetail(
            run=run_from_row(run),
            attempts=tuple(records.attempt_from_row(row) for row in attempts),
            events=tuple(records.event_from_row(row) for row in events),
        )
