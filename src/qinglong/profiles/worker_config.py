"""Configuration of one `ql worker`, validated before PostgreSQL is opened.

Values come from command-line flags, then ``QL_WORKER_*`` environment variables (and
``QL_DATABASE_URL``); an unknown ``QL_WORKER_*`` variable is refused like an unknown flag.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from qinglong.domain.placement import labels_text, parse_labels
from qinglong.domain.repos import PULL_LABEL
from qinglong.errors import InvalidInput
from qinglong.execution.executor import MAX_CONCURRENCY, MIN_CONCURRENCY
from qinglong.execution.identity import MAX_NICE, Identity
from qinglong.execution.logs import MAX_LOG_BYTES, MIN_LOG_BYTES
from qinglong.profiles.settings import listen_address, load_settings, postgres_url, process_name

ENV_PREFIX = "QL_WORKER_"
DEFAULT_LOG_BYTES = 16 * 1024 * 1024


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    database_url: str = Field(validation_alias="QL_DATABASE_URL")
    worker_id: str
    slots: int = Field(default=4, ge=MIN_CONCURRENCY, le=MAX_CONCURRENCY)
    lease_ms: int = Field(default=30_000, ge=5_000, le=600_000)
    drain_timeout_ms: int = Field(default=30_000, ge=0, le=3_600_000)
    poll_ms: int = Field(default=1_000, ge=100, le=60_000)
    log_max_bytes: int = Field(default=DEFAULT_LOG_BYTES, ge=MIN_LOG_BYTES, le=MAX_LOG_BYTES)
    log_dir: str | None = None  # spool of the output being shipped (default: a temp dir)
    pool_size: int | None = Field(default=None, ge=2, le=64)  # None: sized from the slots
    http: str = "127.0.0.1:8082"
    labels: str = ""  # KEY[=VALUE],... (domain/placement.py); stored in canonical order
    nice: int = Field(default=0, ge=0, le=MAX_NICE)  # every command's niceness
    run_as: str | None = None  # the user commands run as (a worker started as root)
    repos_url: str | None = None  # the database subscriptions' pulls import into (ql_admin)
    deps_dir: str | None = None  # projects' dependency environments (docs/dependencies.md)

    _name = field_validator("worker_id")(process_name)
    _url = field_validator("database_url")(postgres_url("ql worker", " (ql serve runs Runs on SQLite)"))
    _http = field_validator("http")(listen_address)

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: str) -> str:
        if not value.strip():
            return ""
        try:
            return labels_text(parse_labels([value]))
        except InvalidInput as exc:
            raise ValueError(exc.rule) from None

    def identity(self) -> Identity:
        """How commands are started (InvalidConfig for a --run-as this process cannot use)."""
        return Identity.of(self.nice, self.run_as)

    @field_validator("repos_url")
    @classmethod
    def _repos_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL of the ql_admin role (or another "
                             "role that may publish)")
        return value

    @property
    def effective_deps_dir(self) -> Path:
        """Where this worker caches projects' dependency environments: --deps-dir, else
        $XDG_CACHE_HOME/qinglong/deps (~/.cache/qinglong/deps)."""
        if self.deps_dir:
            return Path(self.deps_dir).absolute()
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "qinglong" / "deps"

    @property
    def label_map(self) -> dict[str, str | None]:
        """The labels this worker offers (none: it takes only Runs that require none); a
        worker given --repos-url also offers ``ql-repos``, which pulls require."""
        found = parse_labels([self.labels]) if self.labels else {}
        if self.repos_url is not None:
            found.setdefault(PULL_LABEL, None)
        return found

    @property
    def connections(self) -> int:
        """The pool's size: ``--pool-size``, or one connection per two slots plus two, 4-32.

        Starts, renewals, endings and log shipping share the pool; a burst of starts on a
        pool far smaller than the slots left renewals waiting for a connection."""
        if self.pool_size is not None:
            return self.pool_size
        return max(4, min(32, self.slots // 2 + 2))

    @property
    def idle_in_transaction_timeout_ms(self) -> int:
        """Below the lease, so a frozen worker's row locks are released before takeover."""
        return max(1_000, min(10_000, self.lease_ms // 3))

    @property
    def statement_timeout_ms(self) -> int:
        return max(1_000, min(15_000, self.lease_ms // 3))


def load_worker_settings(flags: dict[str, Any]) -> WorkerSettings:
    return load_settings(WorkerSettings, prefix=ENV_PREFIX, command="ql worker", flags=flags)
