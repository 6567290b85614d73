"""PostgreSQL Run reads (runtime role)."""

from __future__ import annotations

import psycopg

from qinglong.domain.model import Run, RunDetail
from qinglong.storage.ports import RunListParams
from qinglong.storage.postgres.connection import QUERIES, Connector
from qinglong.storage.postgres.errors import translate
from qinglong.storage.run_reader import RunReader


class PgRunStore:
    def __init__(self, connector: Connector) -> None:
        self._connector = connector

    def run_list(self, params: RunListParams) -> list[Run]:
        with self._connector.connection() as conn:
            try:
                return RunReader(conn, QUERIES).run_list(params)
            except psycopg.Error as exc:
                raise translate(exc, "list runs", conn) from exc

    def run_get(self, run_id: str) -> RunDetail:
        with self._connector.connection() as conn:
            try:
                return RunReader(conn, QUERIES).run_get(run_id)
            except psycopg.Error as exc:
                raise translate(exc, "read run", conn) from exc
