"""The notify store: notification channels and rules (``ql_admin`` on PostgreSQL) and the
outbox the dispatcher delivers from (``ql_runtime``), written once over the kernel.

``outbox_enqueue`` turns Run outcomes and misfires that rules want into outbox rows, one per
(channel, event): a repeated pass adds nothing. ``outbox_claim`` leases the next due
delivery (SKIP LOCKED where several processes dispatch); ``outbox_record`` reports its
attempt under that lease and returns the delivery as it now stands, or None when the lease
was lost. ``outbox_probe`` tells, in one statement, whether a dispatcher cycle could have
any work: an idle cycle costs only that.

Every write is one READ COMMITTED (PostgreSQL) or ``BEGIN IMMEDIATE`` (SQLite) transaction;
reads are one read each. Any number of `ql control` replicas dispatch at once on
PostgreSQL: a replica scans a source only while it holds that source's cursor row (the
others pass it over), and leases one delivery at a time, so two replicas never send the
same row at the same time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from qinglong.domain.notify.channels import ChannelSpec
from qinglong.domain.notify.model import Channel, ClaimedDelivery, Delivery, Rule
from qinglong.errors import StorageError
from qinglong.ids import new_uuid
from qinglong.storage.kernel import Database
from qinglong.storage.notify.params import (
    ChannelPutParams,
    DeliveryListParams,
    EnqueueReport,
    MaintainReport,
    OutboxClaimParams,
    OutboxEnqueueParams,
    OutboxMaintainParams,
    OutboxProbe,
    OutboxProbeParams,
    OutboxRecordParams,
    RuleAddParams,
    RuleRemoveParams,
)
from qinglong.storage.notify.writer import SOURCES, NotifyWriter, probe

T = TypeVar("T")


class NotifyStore:
    def __init__(self, db: Database, *, new_id: Callable[[], str] = new_uuid) -> None:
        self._db = db
        self._new_id = new_id

    def _write(self, action: str, work: Callable[[NotifyWriter], T]) -> T:
        return self._db.write(action, lambda tx: work(NotifyWriter(tx, new_id=self._new_id)),
                              isolation="read committed")

    def _read(self, action: str, work: Callable[[NotifyWriter], T]) -> T:
        return self._db.read(action, lambda tx: work(NotifyWriter(tx, new_id=self._new_id)))

    def now_ms(self) -> int:
        return self._db.now_ms()

    # -- channels and rules -------------------------------------------------------------

    def channel_put(self, params: ChannelPutParams) -> Channel:
        return self._write("save a notification channel", lambda w: w.channel_put(params))

    def channel_get(self, name: str) -> Channel:
        return self._read("read a notification channel", lambda w: w.channel_get(name))

    def channel_list(self) -> list[Channel]:
        return self._read("list notification channels", lambda w: w.channel_list())

    def channel_for_send(self, name: str) -> tuple[ChannelSpec, str | None]:
        return self._read("read a notification channel", lambda w: w.channel_for_send(name))

    def channel_remove(self, name: str) -> Channel:
        return self._write("remove a notification channel", lambda w: w.channel_remove(name))

    def rule_add(self, params: RuleAddParams) -> list[Rule]:
        return self._write("add a notification rule", lambda w: w.rule_add(params))

    def rule_list(self, channel: str | None = None, project_id: str | None = None) -> list[Rule]:
        return self._read("list notification rules", lambda w: w.rule_list(channel, project_id))

    def rule_remove(self, params: RuleRemoveParams) -> int:
        return self._write("remove a notification rule", lambda w: w.rule_remove(params))

    # -- the outbox ---------------------------------------------------------------------

    def outbox_enqueue(self, params: OutboxEnqueueParams) -> EnqueueReport:
        reports = [self._write("enqueue notifications", _enqueue(params, source))
                   for source in SOURCES]
        return EnqueueReport(examined=sum(r.examined for r in reports),
                             enqueued=sum(r.enqueued for r in reports),
                             saturated=any(r.saturated for r in reports))

    def outbox_recoveries(self, limit: int) -> int:
        return self._write("look for recovered triggers", lambda w: w.recoveries(limit))

    def outbox_claim(self, params: OutboxClaimParams) -> ClaimedDelivery | None:
        return self._write("lease a notification", lambda w: w.claim(params))

    def outbox_record(self, params: OutboxRecordParams) -> Delivery | None:
        return self._write("record a notification attempt", lambda w: w.record(params))

    def outbox_maintain(self, params: OutboxMaintainParams) -> MaintainReport:
        return self._write("tidy the notification outbox", lambda w: w.maintain(params))

    def outbox_next_due_in_ms(self, skip_channels: tuple[str, ...] = ()) -> int | None:
        return self._read("read the next notification due",
                          lambda w: w.next_due_in_ms(skip_channels))

    def outbox_probe(self, params: OutboxProbeParams) -> OutboxProbe:
        """One statement, no transaction held (an idle dispatcher cycle sends only this)."""
        return self._db.read("look for notification work", lambda tx: probe(tx, params))

    def outbox_release(self) -> int:
        """At `ql serve` start: every attempt still marked in flight belonged to a previous
        server (the file lock proves it is gone), so it is due again now. Only where one
        process serves the database."""
        if self._db.capabilities.shared:
            raise StorageError("release notification leases: other processes may hold them")
        return self._db.write("release notification leases", lambda tx: tx.execute(
            "notify_outbox_release", tx.clock_args()).rowcount)

    def delivery_list(self, params: DeliveryListParams) -> list[Delivery]:
        return self._read("list notification deliveries", lambda w: w.delivery_list(params))

    def delivery_retry(self, delivery_id: str) -> Delivery:
        return self._write("retry a notification", lambda w: w.delivery_retry(delivery_id))


def _enqueue(params: OutboxEnqueueParams, source: str) -> Callable[[NotifyWriter], EnqueueReport]:
    return lambda writer: writer.enqueue(params, source)
