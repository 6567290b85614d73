"""Open the database a URL names for a surface (a `ql` command, the HTTP API): its stores,
and every use case over them."""

from __future__ import annotations

from qinglong.clock import Clock
from qinglong.service.accounts import SessionPolicy
from qinglong.service.container import Services
from qinglong.storage.open import OpenOptions, Role, open_database


def open_services(url: str, clock: Clock, *, role: Role = Role.CLI,
                  options: OpenOptions | None = None,
                  session_policy: SessionPolicy | None = None) -> Services:
    stores = open_database(url, clock=clock, role=role, options=options)
    try:
        return Services(stores=stores, clock=clock, session_policy=session_policy)
    except BaseException:
        stores.close()
        raise
