"""The small slice of a DB-API connection the shared storage code uses.

Both ``sqlite3`` and ``psycopg`` connections fit: ``execute`` takes a query from the
adapter's own ``.sql`` files (under the same block names in both dialects) and a mapping of
named parameters, and returns a cursor whose rows are dicts (each adapter installs a dict
row factory).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, LiteralString, Protocol

Row = Mapping[str, Any]
Params = Mapping[str, Any]
Queries = Mapping[str, LiteralString]


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Sequence[Any]: ...


class ManyCursor(Protocol):
    def executemany(self, query: LiteralString, params_seq: Sequence[Params], /) -> Any: ...


class Connection(Protocol):
    def execute(self, query: LiteralString, params: Params = ..., /) -> Cursor: ...

    def cursor(self) -> ManyCursor: ...


def fetch_one(conn: Connection, query: LiteralString, params: Params | None = None) -> Row | None:
    row: Row | None = conn.execute(query, params or {}).fetchone()
    return row


def fetch_all(conn: Connection, query: LiteralString, params: Params | None = None) -> list[Row]:
    return list(conn.execute(query, params or {}).fetchall())
