"""What the HTTP API serves from: every use case over one database (service/container.py),
plus what the web surface adds (who to tell when a Run was admitted, whether it is stopping).

``open_web_backend`` opens it: the SQLite file for `ql serve --http` (and `ql web` on a
SQLite file), a connection pool as ``ql_web`` for `ql web` on PostgreSQL.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from qinglong.clock import Clock
from qinglong.profiles.open import OpenOptions, Role, open_services
from qinglong.service.accounts import SessionPolicy
from qinglong.service.container import Services
from qinglong.storage.kernel import Wake
from qinglong.storage.open import WEB_POOL_SIZE

__all__ = ["WEB_POOL_SIZE", "WebBackend", "open_web_backend"]


@dataclass(slots=True, kw_only=True)
class WebBackend(Services):
    on_admitted: list[Callable[[], None]] = field(default_factory=list)  # e.g. poke `ql serve`
    closing: threading.Event = field(default_factory=threading.Event)  # set when stopping


def open_web_backend(url: str, clock: Clock, *, pool_size: int = WEB_POOL_SIZE,
                     session_policy: SessionPolicy | None = None,
                     application_name: str = "ql-web",
                     on_commit: Callable[[Sequence[Wake]], None] | None = None) -> WebBackend:
    services = open_services(url, clock, role=Role.WEB, options=OpenOptions(
        application_name=application_name, pool_size=pool_size, on_commit=on_commit))
    return WebBackend(stores=services.stores, clock=clock, session_policy=session_policy)
