"""The small slice of a DB-API connection the shared storage code uses.

Both ``sqlite3`` and ``psycopg`` connections fit: ``execute`` returns a cursor whose rows
are dicts (each adapter installs a dict row factory). Queries come from the adapter's own
``.sql`` files, under the same block names in both dialects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Sequence[Any]: ...


class Connection(Protocol):
    def execute(self, query: Any, params: Any = ..., /) -> Any: ...


Queries = Mapping[str, Any]
Row = Mapping[str, Any]
