"""The notify store: notification channels and rules (``ql_admin`` on PostgreSQL) and the
outbox the dispatcher delivers from (``ql_runtime``), written once over the kernel.

``outbox_enqueue`` turns Run outcomes and misfires that rules want into outbox rows, one per
(channel, event): a repeated pass adds nothing. ``outbox_unplaceable`` does the same for
a page of the queued Runs no live worker can take (storage/notify/unplaceable.py), and
``outbox_deadlines`` for the Runs running too long or not started in time
(storage/notify/deadlines.py). ``outbox_claim`` leases the next due
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

from qinglong.domain.notify.events import RuleEvent
from qinglong.errors import StorageError
from qinglong.ids import new_uuid
from qinglong.storage.kernel import Database
from qinglong.storage.notify.deadlines import DeadlineScan
from qinglong.storage.notify.params import (
    EnqueueReport,
    OutboxEnqueueParams,
    OutboxProbe,
    OutboxProbeParams,
    UnplaceableParams,
    UnplaceableReport,
)
from qinglong.storage.notify.unplaceable import UnplaceableScan
from qinglong.storage.notify.writer import SOURCES, NotifyWriter, probe
from qinglong.storage.units import UnitStore, reads, writes


class NotifyStore(UnitStore[NotifyWriter]):
    def __init__(self, db: Database, *, new_id: Callable[[], str] = new_uuid) -> None:
        super().__init__(db, NotifyWriter, new_id=new_id)

    # -- channels and rules -------------------------------------------------------------

    channel_put = writes("save a notification channel", NotifyWriter.channel_put)
    channel_get = reads("read a notification channel", NotifyWriter.channel_get)
    channel_list = reads("list notification channels", NotifyWriter.channel_list)
    channel_for_send = reads("read a notification channel", NotifyWriter.channel_for_send)
    channel_remove = writes("remove a notification channel", NotifyWriter.channel_remove)
    rule_add = writes("add a notification rule", NotifyWriter.rule_add)
    rule_list = reads("list notification rules", NotifyWriter.rule_list)
    rule_remove = writes("remove a notification rule", NotifyWriter.rule_remove)

    # -- the outbox ---------------------------------------------------------------------

    def outbox_enqueue(self, params: OutboxEnqueueParams) -> EnqueueReport:
        reports = [self._write("enqueue notifications", _enqueue(params, source))
                   for source in SOURCES]
        return EnqueueReport(examined=sum(r.examined for r in reports),
                             enqueued=sum(r.enqueued for r in reports),
                             saturated=any(r.saturated for r in reports))

    def outbox_unplaceable(self, params: UnplaceableParams) -> UnplaceableReport:
        """One pass over a page of the queued Runs that require worker labels: each that no
        live worker can take and that has waited out a rule's delay is notified once per
        channel."""
        return self._db.write("look for runs no worker can take", lambda tx: UnplaceableScan(
            tx, new_id=self._new_id).scan(params), isolation="read committed")

    def outbox_deadlines(self, event: RuleEvent, params: UnplaceableParams) -> UnplaceableReport:
        """One pass over a page of the Runs that may be late for ``event`` (running_long,
        late_start): each that has run out a rule's delay is notified once per channel."""
        return self._db.write(f"look for {event.value} runs", lambda tx: DeadlineScan(
            tx, new_id=self._new_id).scan(event, params), isolation="read committed")

    def outbox_walk(self, walk: str, params: UnplaceableParams) -> UnplaceableReport:
        """The walk named ``walk`` (unplaceable, running_long, late_start): one page."""
        if walk == RuleEvent.UNPLACEABLE.value:
            return self.outbox_unplaceable(params)
        return self.outbox_deadlines(RuleEvent(walk), params)

    outbox_recoveries = writes("look for recovered triggers", NotifyWriter.recoveries)
    outbox_claim = writes("lease a notification", NotifyWriter.claim)
    outbox_record = writes("record a notification attempt", NotifyWriter.record)
    outbox_maintain = writes("tidy the notification outbox", NotifyWriter.maintain)
    outbox_next_due_in_ms = reads("read the next notification due", NotifyWriter.next_due_in_ms)

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

    delivery_list = reads("list notification deliveries", NotifyWriter.delivery_list)
    delivery_retry = writes("retry a notification", NotifyWriter.delivery_retry)


def _enqueue(params: OutboxEnqueueParams, source: str) -> Callable[[NotifyWriter], EnqueueReport]:
    return lambda writer: writer.enqueue(params, source)
