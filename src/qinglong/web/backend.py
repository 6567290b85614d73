"""What the HTTP API serves from: every use case over one database (service/container.py),
plus what the web surface adds: whether it is stopping (a long backfill ends early). Who
hears of a Run admitted or a trigger published over the API is the database's business (its
commits wake the processes serving it: storage/wakeups.py).

``profiles/web.py`` opens it: the SQLite file for `ql serve --http` (and `ql web` on a
SQLite file), a connection pool as ``ql_web`` for `ql web` on PostgreSQL.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from qinglong.service.container import Services
from qinglong.service.sso import SingleSignOn


@dataclass(slots=True, kw_only=True)
class WebBackend(Services):
    closing: threading.Event = field(default_factory=threading.Event)  # set when stopping
    sso: SingleSignOn | None = None  # single sign-on, when configured (--oidc-issuer)

