"""What the notification store reads back: channels (never with their secret), rules and
deliveries (the outbox rows)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from qinglong.domain.notify.channels import ChannelSpec
from qinglong.domain.notify.events import RuleEvent


class DeliveryStatus(StrEnum):
    PENDING = "pending"  # waiting for its first attempt or its next retry
    SENDING = "sending"  # an attempt is in flight, under a lease
    DELIVERED = "delivered"  # the receiver accepted it
    DEAD = "dead"  # out of attempts (or its channel was removed): not tried again


@dataclass(frozen=True, slots=True, kw_only=True)
class Channel:
    spec: ChannelSpec
    secret_set: bool  # whether a secret is stored (the secret itself is never read back)
    version: int
    created_at_ms: int
    updated_at_ms: int

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    channel: str
    project_id: str
    task_id: str | None  # None: every task of the project
    events: tuple[RuleEvent, ...]
    created_at_ms: int  # the earliest of its events' rows
    # how long a queued Run no live worker can take waits before it is reported (None: the
    # rule does not ask for unplaceable)
    unplaceable_after_ms: int | None = None
    # how long a Run runs before running_long is sent, how long after its scheduled time a
    # Run not started is reported late_start (None: the rule does not ask for that event)
    running_long_after_ms: int | None = None
    late_start_after_ms: int | None = None

    @property
    def delays(self) -> dict[RuleEvent, int | None]:
        """The delay of each event sent after one (None: the rule does not ask for it)."""
        return {RuleEvent.UNPLACEABLE: self.unplaceable_after_ms,
                RuleEvent.RUNNING_LONG: self.running_long_after_ms,
                RuleEvent.LATE_START: self.late_start_after_ms}


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    id: str  # the idempotency id receivers dedupe by
    channel: str
    event: str
    source_key: str
    project_id: str
    task_id: str | None
    trigger_id: str | None
    run_id: str | None
    status: DeliveryStatus
    attempts: int
    max_attempts: int
    next_attempt_at_ms: int | None  # pending: when; sending: when its lease runs out
    last_status: int | None
    last_error: str | None
    occurred_at_ms: int
    created_at_ms: int
    finished_at_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimedDelivery:
    """A delivery leased for one attempt: what to send, where, and the lease to report with."""

    delivery: Delivery
    payload: dict[str, Any]
    spec: ChannelSpec
    secret: str | None
    token: str
