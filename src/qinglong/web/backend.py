"""What the HTTP API serves from: every use case over one database (service/container.py),
plus what the web surface adds (who to tell when a Run was admitted, whether it is stopping).

``profiles/web.py`` opens it: the SQLite file for `ql serve --http` (and `ql web` on a
SQLite file), a connection pool as ``ql_web`` for `ql web` on PostgreSQL.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from qinglong.service.container import Services


@dataclass(slots=True, kw_only=True)
class WebBackend(Services):
    on_admitted: list[Callable[[], None]] = field(default_factory=list)  # e.g. poke `ql serve`
    closing: threading.Event = field(default_factory=threading.Event)  # set when stopping

