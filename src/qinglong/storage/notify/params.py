"""The verbs' parameters and results of the notify store (storage/notify)."""

from __future__ import annotations

from dataclasses import dataclass

from qinglong.domain.notify.channels import ChannelSpec
from qinglong.domain.notify.events import RuleEvent
from qinglong.domain.notify.model import DeliveryStatus

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
    # with unplaceable among the events: how long such a Run waits before it is reported
    # (None: a new rule waits the default, a rule that asked for it already keeps its delay)
    unplaceable_after_ms: int | None = None
    # the same for running_long and late_start
    running_long_after_ms: int | None = None
    late_start_after_ms: int | None = None

    @property
    def delays(self) -> dict[RuleEvent, int | None]:
        return {RuleEvent.UNPLACEABLE: self.unplaceable_after_ms,
                RuleEvent.RUNNING_LONG: self.running_long_after_ms,
                RuleEvent.LATE_START: self.late_start_after_ms}


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
class UnplaceableParams:
    """One pass of the walk over the queued Runs that require worker labels: up to ``limit``
    Runs after ``after`` (queued_at_ms, run id; None: from the oldest)."""

    after: tuple[int, str] | None = None
    limit: int = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class UnplaceableReport:
    examined: int = 0  # queued Runs looked at
    enqueued: int = 0  # outbox rows written
    next_after: tuple[int, str] | None = None  # where the next pass goes on (None: the start)


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
    # a queued Run that requires labels has waited the shortest delay of an unplaceable rule
    # (not part of ``idle``: such a Run stays until a worker comes, long after it was
    # reported, so the dispatcher walks them on a pace of its own)
    unplaceable: bool = False
    # the same for the running_long and late_start walks
    running_long: bool = False
    late_start: bool = False
    progress: bool = False  # a Run start or success to look at, while a rule asks for them
    deliver: bool = False  # a delivery is due (channels cooling down left out)
    tidy: bool = False  # asked for: a delivery of a removed channel, or a last attempt expired
    purge: bool = False  # asked for: a delivery ended before the retention
    next_due_in_ms: int | None = None  # when the next delivery falls due (cooling left out)

    @property
    def idle(self) -> bool:
        return not (self.enqueue or self.progress or self.recoveries or self.deliver
                    or self.tidy or self.purge)

    @property
    def walks(self) -> frozenset[str]:
        """The walks over Runs in a state (unplaceable, running_long, late_start) that would
        find a page now."""
        return frozenset(name for name, due in (("unplaceable", self.unplaceable),
                                                ("running_long", self.running_long),
                                                ("late_start", self.late_start)) if due)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryListParams:
    status: DeliveryStatus | None = None
    channel: str | None = None
    limit: int = 50
