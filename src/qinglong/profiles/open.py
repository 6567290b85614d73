"""Open the database a URL names for a surface (a `ql` command, the HTTP API): its stores,
and every use case over them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qinglong.clock import Clock
from qinglong.domain.task import ExecutorType
from qinglong.storage.open import (
    DEFAULT_DATABASE_URL,
    OpenOptions,
    Role,
    capabilities_of,
    check_database,
    migrate_database,
    open_database,
)

__all__ = ["DEFAULT_DATABASE_URL", "OpenOptions", "Role", "capabilities_of", "check_database",
           "commands_run_here", "migrate_database", "open_services"]

if TYPE_CHECKING:  # the services load with the first open_services, not with this module
    from qinglong.service.accounts import SessionPolicy
    from qinglong.service.container import Services


def commands_run_here(url: str) -> bool:
    """Whether the Runs of the database ``url`` names execute on this host."""
    return capabilities_of(url).executor_type is ExecutorType.LOCAL_PROCESS


def open_services(url: str, clock: Clock, *, role: Role = Role.CLI,
                  options: OpenOptions | None = None,
                  session_policy: SessionPolicy | None = None) -> Services:
    from qinglong.service.container import Services

    stores = open_database(url, clock=clock, role=role, options=options)
    try:
        return Services(stores=stores, clock=clock, session_policy=session_policy)
    except BaseException:
        stores.close()
        raise
