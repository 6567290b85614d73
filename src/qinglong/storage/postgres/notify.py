"""Notification channels, rules and the outbox on PostgreSQL (database clock).

Every operation is one READ COMMITTED transaction (deadlocks and lock timeouts retried), but
the probe (``outbox_probe``), which is one auto-committed SELECT. Any
number of `ql control` replicas dispatch at once: a replica scans a source only while it
holds that source's cursor row (the others pass it over, SKIP LOCKED), and leases one
delivery at a time with ``FOR UPDATE SKIP LOCKED``, so two replicas never send the same row
at the same time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import psycopg

from qinglong.ids import new_uuid
from qinglong.notify.channels import ChannelSpec
from qinglong.notify.model import Channel, ClaimedDelivery, Delivery, Rule
from qinglong.storage.notify_ports import (
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
from qinglong.storage.notify_writer import SOURCES, NotifyWriter, probe
from qinglong.storage.postgres.connection import QUERIES, Connector, PgConnection
from qinglong.storage.postgres.errors import translate
from qinglong.storage.postgres.transactions import db_now_ms, serializable

T = TypeVar("T")


class PgNotifyStore:
    """The NotifyStore port on PostgreSQL."""

    def __init__(self, connector: Connector, *, new_id: Callable[[], str] = new_uuid) -> None:
        self._connector = connector
        self._new_id = new_id

    def _tx(self, action: str, work: Callable[[NotifyWriter], T]) -> T:
        def run(conn: PgConnection) -> T:
            return work(NotifyWriter(conn, QUERIES, now_ms=db_now_ms(conn), new_id=self._new_id))

        return serializable(self._connector, action, run, isolation="read committed")

    def now_ms(self) -> int:
        with self._connector.connection() as conn:
            try:
                return db_now_ms(conn)
            except psycopg.Error as exc:
                raise translate(exc, "read the database clock", conn) from exc

    def channel_put(self, params: ChannelPutParams) -> Channel:
        return self._tx("save a notification channel", lambda w: w.channel_put(params))

    def channel_get(self, name: str) -> Channel:
        return self._tx("read a notification channel", lambda w: w.channel_get(name))

    def channel_list(self) -> list[Channel]:
        return self._tx("list notification channels", lambda w: w.channel_list())

    def channel_for_send(self, name: str) -> tuple[ChannelSpec, str | None]:
        return self._tx("read a notification channel", lambda w: w.channel_for_send(name))

    def channel_remove(self, name: str) -> Channel:
        return self._tx("remove a notification channel", lambda w: w.channel_remove(name))

    def rule_add(self, params: RuleAddParams) -> list[Rule]:
        return self._tx("add a notification rule", lambda w: w.rule_add(params))

    def rule_list(self, channel: str | None = None, project_id: str | None = None) -> list[Rule]:
        return self._tx("list notification rules", lambda w: w.rule_list(channel, project_id))

    def rule_remove(self, params: RuleRemoveParams) -> int:
        return self._tx("remove a notification rule", lambda w: w.rule_remove(params))

    def outbox_enqueue(self, params: OutboxEnqueueParams) -> EnqueueReport:
        reports = [self._tx("enqueue notifications", _enqueue(params, source))
                   for source in SOURCES]
        return EnqueueReport(examined=sum(r.examined for r in reports),
                             enqueued=sum(r.enqueued for r in reports),
                             saturated=any(r.saturated for r in reports))

    def outbox_recoveries(self, limit: int) -> int:
        return self._tx("look for recovered triggers", lambda w: w.recoveries(limit))

    def outbox_claim(self, params: OutboxClaimParams) -> ClaimedDelivery | None:
        return self._tx("lease a notification", lambda w: w.claim(params))

    def outbox_record(self, params: OutboxRecordParams) -> Delivery | None:
        return self._tx("record a notification attempt", lambda w: w.record(params))

    def outbox_maintain(self, params: OutboxMaintainParams) -> MaintainReport:
        return self._tx("tidy the notification outbox", lambda w: w.maintain(params))

    def outbox_next_due_in_ms(self, skip_channels: tuple[str, ...] = ()) -> int | None:
        return self._tx("read the next notification due",
                        lambda w: w.next_due_in_ms(skip_channels))

    def outbox_probe(self, params: OutboxProbeParams) -> OutboxProbe:
        """One auto-committed SELECT on the database clock: no BEGIN, no COMMIT, nothing
        locked (an idle dispatcher cycle sends only this)."""
        with self._connector.connection() as conn:
            try:
                return probe(conn, QUERIES, params)
            except psycopg.Error as exc:
                raise translate(exc, "look for notification work", conn) from exc

    def delivery_list(self, params: DeliveryListParams) -> list[Delivery]:
        return self._tx("list notification deliveries", lambda w: w.delivery_list(params))

    def delivery_retry(self, delivery_id: str) -> Delivery:
        return self._tx("retry a notification", lambda w: w.delivery_retry(delivery_id))


def _enqueue(params: OutboxEnqueueParams, source: str) -> Callable[[NotifyWriter], EnqueueReport]:
    return lambda writer: writer.enqueue(params, source)
