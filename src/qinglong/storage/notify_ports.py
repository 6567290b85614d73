"""The NotifyStore port: notification channels and rules, and the outbox the dispatcher
delivers from (the adapters: ``sqlite/notify.py``, ``postgres/notify.py``; the logic they
share: ``notify_writer.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from qinglong.notify.channels import ChannelSpec
from qinglong.notify.events import RuleEvent
from qinglong.notify.model import Channel, ClaimedDelivery, Delivery, DeliveryStatus, Rule

MAX_LIST = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelPutParams:
    spec: ChannelSpec
    secret: str | None  # None with keep_secret: the stored one stays
    keep_secret: bool = False
    replace: bool = False  # False: Conflict when a channel of that name is in use


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleAddParams:
    channel: str
    project_id: str
    task_id: str | None  # None: every task of the project
    events: tuple[RuleEvent, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleRemoveParams:
    channel: str
    project_id: str
    task_id: str | None
    events: tuple[RuleEvent, ...] | None = None  # None: every event of the rule


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxEnqueueParams:
    """One pass over the sources: each page holds up to ``limit`` source rows (plus those
    sharing the last row's millisecond); a row is looked at again once it is ``settle_ms``
    old, when no transaction can still be committing it."""

    settle_ms: int
    limit: int = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class EnqueueReport:
    examined: int = 0  # source rows looked at
    enqueued: int = 0  # outbox rows written
    saturated: bool = False  # a page was full: more is waiting


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxClaimParams:
    owner: str
    skip_channels: tuple[str, ...] = ()  # channels that failed earlier in this cycle


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxRecordParams:
    delivery_id: str
    token: str
    ok: bool
    status_code: int | None
    detail: str
    retry_in_ms: int  # failed: the backoff before the next attempt


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxMaintainParams:
    retention_ms: int | None = None  # None: no purge this time
    purge_limit: int = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintainReport:
    orphaned: int = 0  # deliveries of removed channels ended dead
    exhausted: int = 0  # last attempts whose sender vanished ended dead
    purged: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxProbeParams:
    """What the steps of the next dispatcher cycle would be asked to do: the settle window of
    enqueue, the channels the dispatcher lets cool down (deliver leaves them out), and
    whether the tidy (and its purge, with this retention) is due in this cycle."""

    settle_ms: int
    skip_channels: tuple[str, ...] = ()
    tidy: bool = False
    retention_ms: int | None = None  # None: no purge this time


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxProbe:
    """Whether each step of a dispatcher cycle could have work, read in one statement.

    False is a promise: the step would write nothing a notification depends on (a scan
    cursor moving over no rows, or a waiting recovery being marked looked at, are left for a
    cycle with work). True may be wrong the other way (a cursor or a row another replica
    holds now, a row that changes before the step runs)."""

    enqueue: bool = False  # a rule and a source without a cursor, or source rows to look at
    recoveries: bool = False  # a waiting trigger was deleted, misfired again or fired on time
    deliver: bool = False  # a delivery is due (channels cooling down left out)
    tidy: bool = False  # asked for: a delivery of a removed channel, or a last attempt expired
    purge: bool = False  # asked for: a delivery ended before the retention
    next_due_in_ms: int | None = None  # when the next delivery falls due (cooling left out)

    @property
    def idle(self) -> bool:
        return not (self.enqueue or self.recoveries or self.deliver or self.tidy or self.purge)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryListParams:
    status: DeliveryStatus | None = None
    channel: str | None = None
    limit: int = 50


class NotifyStore(Protocol):
    """Channels and rules (``ql_admin`` on PostgreSQL) and the outbox (``ql_runtime``).

    ``outbox_enqueue`` turns Run outcomes and misfires that rules want into outbox rows, one
    per (channel, event): a repeated pass adds nothing. ``outbox_claim`` leases the next due
    delivery (SKIP LOCKED on PostgreSQL); ``outbox_record`` reports its attempt under that
    lease and returns the delivery as it now stands, or None when the lease was lost.
    ``outbox_probe`` tells, in one statement (on PostgreSQL one auto-committed SELECT on the
    database clock), whether a dispatcher cycle could have any work: an idle cycle costs
    only that.
    """

    def channel_put(self, params: ChannelPutParams) -> Channel: ...
    def channel_get(self, name: str) -> Channel: ...
    def channel_list(self) -> list[Channel]: ...
    def channel_for_send(self, name: str) -> tuple[ChannelSpec, str | None]: ...
    def channel_remove(self, name: str) -> Channel: ...
    def rule_add(self, params: RuleAddParams) -> list[Rule]: ...
    def rule_list(self, channel: str | None = None,
                  project_id: str | None = None) -> list[Rule]: ...
    def rule_remove(self, params: RuleRemoveParams) -> int: ...
    def outbox_enqueue(self, params: OutboxEnqueueParams) -> EnqueueReport: ...
    def outbox_recoveries(self, limit: int) -> int: ...
    def outbox_claim(self, params: OutboxClaimParams) -> ClaimedDelivery | None: ...
    def outbox_record(self, params: OutboxRecordParams) -> Delivery | None: ...
    def outbox_maintain(self, params: OutboxMaintainParams) -> MaintainReport: ...
    def outbox_next_due_in_ms(self, skip_channels: tuple[str, ...] = ()) -> int | None: ...
    def outbox_probe(self, params: OutboxProbeParams) -> OutboxProbe: ...
    def delivery_list(self, params: DeliveryListParams) -> list[Delivery]: ...
    def delivery_retry(self, delivery_id: str) -> Delivery: ...
    def now_ms(self) -> int: ...
