"""Open the database a URL names: the one place that reads which kind of database it is.

``open_database(url, role)`` checks that the schema is migrated and exact, and returns
every store over that database; callers that must behave differently ask
``capabilities_of(url)`` (or ``Stores.capabilities``) for the capability that makes the
difference, never for the URL's scheme. PostgreSQL code is imported only for a PostgreSQL
URL, so the SQLite profiles never load it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from qinglong.clock import Clock
from qinglong.errors import InvalidInput
from qinglong.storage.kernel import Capabilities, Wake
from qinglong.storage.stores import Stores

DEFAULT_DATABASE_URL = "sqlite:///./qinglong.db"
WEB_POOL_SIZE = 8


class Role(StrEnum):
    """What a process does with the database, which decides how it connects."""

    CLI = "cli"  # one command: one connection, as the URL's database role
    WEB = "web"  # `ql web`: a pool, as ql_web (PostgreSQL)
    SERVE = "serve"  # `ql serve`: the one process serving a SQLite file
    AUDIT = "audit"  # `ql audit`: one read-only snapshot (any server, a standby too)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenOptions:
    application_name: str = "ql-cli"
    pool_size: int = WEB_POOL_SIZE  # Role.WEB on PostgreSQL
    on_commit: Callable[[Sequence[Wake]], None] | None = None  # this process's wake-ups


def _kind(url: str) -> str:
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "sqlite":
        return "sqlite"
    if scheme in ("postgresql", "postgres"):
        return "postgresql"
    raise InvalidInput("database-url", "must start with sqlite:/// or postgresql://")


def capabilities_of(url: str) -> Capabilities:
    """What the database ``url`` names can do, without connecting to it."""
    if _kind(url) == "sqlite":
        from qinglong.storage.sqlite.driver import CAPABILITIES

        return CAPABILITIES
    from qinglong.storage.postgres.driver import CAPABILITIES as PG_CAPABILITIES

    return PG_CAPABILITIES


def open_database(url: str, *, clock: Clock, role: Role = Role.CLI,
                  options: OpenOptions | None = None) -> Stores:
    """Every store of the migrated database ``url`` names (NotReady when it is not)."""
    options = options or OpenOptions()
    if _kind(url) == "sqlite":
        from qinglong.storage.sqlite.open import open_sqlite_stores

        return open_sqlite_stores(url, clock, actor_id=role.value, on_commit=options.on_commit)
    from qinglong.storage.postgres.open import open_postgres_stores

    return open_postgres_stores(url, web=role is Role.WEB, any_server=role is Role.AUDIT,
                                actor_id=role.value,
                                application_name=options.application_name,
                                pool_size=options.pool_size, on_commit=options.on_commit)


def migrate_database(url: str, clock: Clock) -> tuple[list[str], str | None]:
    """Apply pending migrations (creating a SQLite file, or the PostgreSQL database and roles
    when the connecting role may); the migrations applied and the schema's version."""
    if _kind(url) == "sqlite":
        from qinglong.storage.sqlite.open import migrate_sqlite

        return migrate_sqlite(url, clock)
    from qinglong.storage.postgres.open import migrate_postgres

    return migrate_postgres(url)


def check_database(url: str) -> list[str]:
    """Readiness findings for `ql db check` (empty: ready)."""
    if _kind(url) == "sqlite":
        from qinglong.storage.sqlite.open import check_sqlite

        return check_sqlite(url)
    from qinglong.storage.postgres.open import check_postgres

    return check_postgres(url)
