"""Configuration of one `ql control` replica, validated before PostgreSQL is opened.

Values come from command-line flags, then ``QL_CONTROL_*`` environment variables (and
``QL_DATABASE_URL``); an unknown ``QL_CONTROL_*`` variable is refused like an unknown flag.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from qinglong.domain.decision import MAX_GRACE_MS, MIN_GRACE_MS
from qinglong.domain.retention import DEFAULT_RETENTION_DAYS, KEEP_FOREVER, MAX_RETENTION_DAYS
from qinglong.domain.schedule import (
    DEFAULT_CLAIM_LEASE_MS,
    MAX_BUDGET,
    MAX_CLAIM_LEASE_MS,
    MIN_BUDGET,
    MIN_CLAIM_LEASE_MS,
    lease_grace_risk,
)
from qinglong.errors import InvalidConfig
from qinglong.profiles.settings import listen_address, load_settings, postgres_url, process_name

ENV_PREFIX = "QL_CONTROL_"


class ControlSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    database_url: str = Field(validation_alias="QL_DATABASE_URL")
    owner_id: str
    lease_ms: int = Field(default=DEFAULT_CLAIM_LEASE_MS, ge=MIN_CLAIM_LEASE_MS,
                          le=MAX_CLAIM_LEASE_MS)
    grace_ms: int = Field(default=30_000, ge=MIN_GRACE_MS, le=MAX_GRACE_MS)
    # a lease not shorter than the grace is refused unless this is set (docs/guarantees.md)
    allow_lease_over_grace: bool = False
    # a claim statement takes up to `batch` due rows and commits their decisions in one
    # SERIALIZABLE transaction (docs/design/admission-fast-path.md); a cycle claims up to
    # `budget` rows and a saturated cycle starts the next at once
    budget: int = Field(default=256, ge=MIN_BUDGET, le=MAX_BUDGET)
    batch: int = Field(default=256, ge=MIN_BUDGET, le=MAX_BUDGET)
    interval_ms: int = Field(default=1_000, ge=250, le=3_600_000)
    stop_timeout_ms: int = Field(default=10_000, ge=100, le=30_000)
    commit_deadline_ms: int = Field(default=5_000, ge=100, le=60_000)
    pool_size: int = Field(default=4, ge=1, le=64)
    http: str = "127.0.0.1:8081"
    reactivate_ms: int = Field(default=1_000, ge=100, le=60_000)
    log_retention_days: int = Field(default=14, ge=1, le=3650)
    # claim records and the events of ended Runs (docs/retention.md); 0 keeps them for ever
    retention_days: int = Field(default=DEFAULT_RETENTION_DAYS, ge=KEEP_FOREVER,
                                le=MAX_RETENTION_DAYS)

    _name = field_validator("owner_id")(process_name)
    _url = field_validator("database_url")(postgres_url("ql control", ""))
    _http = field_validator("http")(listen_address)

    @property
    def idle_in_transaction_timeout_ms(self) -> int:
        """Below the lease, so a frozen replica's row lock is released before takeover."""
        return max(500, min(10_000, self.lease_ms // 2))

    @property
    def transaction_timeout_ms(self) -> int:
        return max(800, min(20_000, self.lease_ms * 4 // 5))

    @property
    def statement_timeout_ms(self) -> int:
        return max(500, min(5_000, self.lease_ms // 2))


def load_control_settings(flags: dict[str, Any]) -> ControlSettings:
    """Flags (only those given) override the environment; errors name the option. A claim
    lease not shorter than the grace is refused without ``--allow-lease-over-grace``."""
    settings = load_settings(ControlSettings, prefix=ENV_PREFIX, command="ql control",
                             flags=flags)
    risk = lease_grace_risk(settings.lease_ms, settings.grace_ms)
    if risk is not None and not settings.allow_lease_over_grace:
        raise InvalidConfig("--lease-ms", f"{risk}; set a lease shorter than --grace-ms, or "
                            "pass --allow-lease-over-grace to accept that risk")
    return settings
