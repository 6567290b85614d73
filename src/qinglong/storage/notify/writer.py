"""Notification channels, rules and the outbox inside one transaction of the notify store,
stamping rows with one reading of the store's clock (taken when first needed).

How outbox rows come to exist (``enqueue``): the dispatcher scans the durable tables -- the
``run.failed|timed_out|lost|cancelled`` events and the misfire records -- by their time, with
a cursor per source. Each row is looked at twice: once when the scan first passes it (the
frontier), and again once it is older than the settle window, when no transaction that could
still commit it is open any more (the settled position). Transactions commit out of the order
of their timestamps, so a row can appear behind the frontier; the second look finds it. What
a rule wants becomes one outbox row per (channel, source key), and the unique key makes every
further look a no-op. (Queued Runs no live worker can take are a state, not rows that appear
once: storage/notify/unplaceable.py walks them instead.)
"""

from __future__ import annotations

import json

from qinglong.domain.notify.channels import ChannelSpec, spec_from_stored
from qinglong.domain.notify.events import ALL_TASKS, DELAYED, RuleEvent, delays_given
from qinglong.domain.notify.model import Channel, ClaimedDelivery, Delivery, DeliveryStatus, Rule
from qinglong.domain.notify.payload import NotifyEvent, RecoveryFacts
from qinglong.domain.runs import EXECUTION_ORIGIN_SCHEDULED
from qinglong.errors import Conflict, InvalidInput, NotFound, RecordCorrupt
from qinglong.storage.dbapi import Row
from qinglong.storage.kernel import Tx
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
from qinglong.storage.notify.rows import (
    OutboxUnit,
    delivery_from_row,
    json_value,
    misfire_event,
    optional_int,
    progress_event,
    recovery_key,
    run_event,
)

SOURCES = ("run_outcomes", "misfires", "run_progress")
_PAGE = {"run_outcomes": "notify_outcomes_page", "misfires": "notify_misfires_page",
         "run_progress": "notify_progress_page"}
NO_BOUND = 2**62  # "no upper bound" for the frontier's page
CLAIM_TRIES = 4  # rows whose channel cannot be read are set aside, then the next is tried
CORRUPT_RETRY_MS = 60_000
MAX_ERROR = 1024


def _channel_from_row(row: Row) -> Channel:
    return Channel(spec=spec_from_stored(row["name"], row["kind"], row["config_json"]),
                   secret_set=bool(row["secret_set"]), version=int(row["version"]),
                   created_at_ms=int(row["created_at_ms"]),
                   updated_at_ms=int(row["updated_at_ms"]))


class NotifyWriter(OutboxUnit):
    """One unit of notify work in ``tx``, at one reading of the store's clock."""

    # -- channels -----------------------------------------------------------------------

    def channel_put(self, params: ChannelPutParams) -> Channel:
        spec = params.spec
        existing = self._one("notify_channel_get", {"name": spec.name})
        values = {"name": spec.name, "kind": spec.kind.value, "config_json": spec.config_json(),
                  "secret": params.secret, "now_ms": self.now_ms}
        if existing is None:
            self._run("notify_channel_insert", values)
        else:
            in_use = existing["removed_at_ms"] is None
            if in_use and not params.replace:
                raise Conflict(f"channel {spec.name!r} already exists; add --replace to change it")
            keep = params.keep_secret and params.secret is None and in_use
            self._run("notify_channel_update", {**values, "keep_secret": keep})
        return self.channel_get(spec.name)

    def channel_get(self, name: str) -> Channel:
        row = self._one("notify_channel_get", {"name": name})
        if row is None or row["removed_at_ms"] is not None:
            raise NotFound("channel", name)
        return _channel_from_row(row)

    def channel_list(self) -> list[Channel]:
        return [_channel_from_row(row) for row in self._all("notify_channel_list")]

    def channel_for_send(self, name: str) -> tuple[ChannelSpec, str | None]:
        row = self._one("notify_channel_secret", {"name": name})
        if row is None:
            raise NotFound("channel", name)
        return spec_from_stored(row["name"], row["kind"], row["config_json"]), row["secret"]

    def channel_remove(self, name: str) -> Channel:
        channel = self.channel_get(name)
        self._run("notify_rules_delete_channel", {"name": name})
        self._run("notify_channel_remove", {"name": name, "now_ms": self.now_ms})
        return channel

    # -- rules --------------------------------------------------------------------------

    def rule_add(self, params: RuleAddParams) -> list[Rule]:
        self.channel_get(params.channel)
        found = self._one("notify_project_exists", {"project_id": params.project_id})
        if not found or not found["found"]:
            raise NotFound("project", params.project_id)
        if params.task_id is not None:
            found = self._one("notify_task_exists", {"project_id": params.project_id,
                                                     "task_id": params.task_id})
            if not found or not found["found"]:
                raise NotFound("task", f"{params.project_id}/{params.task_id}")
        if not params.events:
            raise InvalidInput("events", "name at least one event")
        given = delays_given(params.events, params.delays)
        key = {"channel": params.channel, "project_id": params.project_id,
               "task_id": params.task_id or ALL_TASKS}
        for event in params.events:
            after = given.get(event, DELAYED[event]) if event in DELAYED else None
            self._run("notify_rule_insert", {**key, "event": event.value, "after_ms": after,
                                             "now_ms": self.now_ms})
        for event, after in given.items():  # a rule that asked for it already: it changes
            self._run("notify_rule_delay", {**key, "event": event.value, "after_ms": after})
        return [rule for rule in self.rule_list(params.channel, params.project_id)
                if rule.task_id == params.task_id]

    def rule_list(self, channel: str | None = None, project_id: str | None = None) -> list[Rule]:
        grouped: dict[tuple[str, str, str], list[Row]] = {}
        for row in self._all("notify_rule_list", {"channel": channel, "project_id": project_id}):
            grouped.setdefault((row["channel"], row["project_id"], row["task_id"]), []).append(row)
        rules = []
        for (name, project, task), rows in grouped.items():
            wanted = {row["event"] for row in rows}
            after = {row["event"]: int(row["after_ms"]) for row in rows
                     if row["after_ms"] is not None}
            rules.append(Rule(channel=name, project_id=project,
                              task_id=None if task == ALL_TASKS else task,
                              events=tuple(e for e in RuleEvent if e.value in wanted),
                              created_at_ms=min(int(row["created_at_ms"]) for row in rows),
                              unplaceable_after_ms=after.get(RuleEvent.UNPLACEABLE.value),
                              running_long_after_ms=after.get(RuleEvent.RUNNING_LONG.value),
                              late_start_after_ms=after.get(RuleEvent.LATE_START.value)))
        return sorted(rules, key=lambda r: (r.channel, r.project_id, r.task_id or ""))

    def rule_remove(self, params: RuleRemoveParams) -> int:
        self.channel_get(params.channel)
        events = None if params.events is None else json.dumps([e.value for e in params.events])
        removed = self._run("notify_rule_delete", {
            "channel": params.channel, "project_id": params.project_id,
            "task_id": params.task_id or ALL_TASKS, "events": events})
        if removed == 0:
            target = f"{params.project_id}/{params.task_id or ALL_TASKS}"
            raise NotFound("rule", f"{params.channel} -> {target}")
        return removed

    # -- enqueue ------------------------------------------------------------------------

    def enqueue(self, params: OutboxEnqueueParams, source: str) -> EnqueueReport:
        """One pass over ``source``: the rows after the frontier, then the rows that just left
        the settle window; a cursor another replica holds now is passed over."""
        row = self._one("notify_cursor_lock", {"source": source})
        if row is not None:
            frontier, settled = int(row["frontier_ms"]), int(row["settled_ms"])
        else:
            start = self._start_cursor(source)
            if start is None:
                return EnqueueReport()
            frontier = settled = start
        fresh_to, fresh_rows, fresh_full = self._page(source, frontier, NO_BOUND, params.limit)
        enqueued = self._examine(source, frontier, fresh_to) if fresh_rows else 0
        settle_target = min(self.now_ms - params.settle_ms, fresh_to)
        settled_to, settled_rows, settled_full = settled, 0, False
        if settle_target > settled:
            settled_to, settled_rows, settled_full = self._page(source, settled, settle_target,
                                                                params.limit)
            if settled_rows:
                enqueued += self._examine(source, settled, settled_to)
        if (fresh_to, settled_to) != (frontier, settled):
            self._run("notify_cursor_update", {"source": source, "frontier_ms": fresh_to,
                                               "settled_ms": settled_to, "now_ms": self.now_ms})
        return EnqueueReport(examined=fresh_rows + settled_rows, enqueued=enqueued,
                             saturated=fresh_full or settled_full)

    def _start_cursor(self, source: str) -> int | None:
        """The first position of a source that has none: just before the first rule (None:
        there is no rule yet, or another replica holds the source's cursor right now)."""
        exists = self._one("notify_cursor_exists", {"source": source})
        if exists and exists["found"]:
            return None
        first = self._one("notify_cursor_start")
        if first is None or first["first_rule_ms"] is None:
            return None
        at = int(first["first_rule_ms"]) - 1
        inserted = self._run("notify_cursor_insert", {"source": source, "at_ms": at,
                                                      "now_ms": self.now_ms})
        return at if inserted == 1 else None  # 0: another replica made it meanwhile

    def _page(self, source: str, after: int, upto: int, limit: int) -> tuple[int, int, bool]:
        """The end of the next page of ``source`` after ``after``: (position, rows, full). A
        full page ends at its last row's time (every row of that millisecond belongs to it);
        otherwise at ``upto``, or for the frontier at the last row seen."""
        rows = self._all(_PAGE[source], {"after_ms": after, "upto_ms": upto, "limit": limit})
        if len(rows) >= limit:
            return int(rows[-1]["at_ms"]), len(rows), True
        if upto < NO_BOUND:
            return upto, len(rows), False
        return (int(rows[-1]["at_ms"]) if rows else after), len(rows), False

    def _examine(self, source: str, after: int, upto: int) -> int:
        window = {"after_ms": after, "upto_ms": upto}
        written = 0
        if source in ("run_outcomes", "run_progress"):
            match, event = (("notify_outcomes_match", run_event) if source == "run_outcomes"
                            else ("notify_progress_match", progress_event))
            for row in self._all(match, window):
                written += self._insert(event(row), row)
            return written
        for row in self._all("notify_misfires_match", window):
            written += self._insert(misfire_event(row), row)
        self._run("notify_recovery_watch", {**window, "now_ms": self.now_ms})
        return written

    # -- recoveries ---------------------------------------------------------------------

    def recoveries(self, limit: int) -> int:
        """Look at up to ``limit`` triggers waiting to fire on time after a misfire; each one
        that did is notified (``trigger.recovered``) and no longer watched."""
        recovered = 0
        for watch in self._all("notify_recovery_batch", {"limit": limit}):
            key = {"project_id": watch["project_id"], "trigger_id": watch["trigger_id"]}
            due = int(watch["due_at_ms"])
            probe = self._one("notify_recovery_probe", {
                **key, "due_at_ms": due, "next_fire_at_ms": int(watch["next_fire_at_ms"]),
                "origin": EXECUTION_ORIGIN_SCHEDULED})
            if probe is None or probe["task_id"] is None:  # the trigger is gone
                self._run("notify_recovery_delete", {**key, "due_at_ms": due})
            elif probe["later_due_at_ms"] is not None:
                self._run("notify_recovery_move", {
                    **key, "old_due_at_ms": due, "trigger_revision": probe["later_revision"],
                    "due_at_ms": probe["later_due_at_ms"],
                    "next_fire_at_ms": probe["later_next_fire_at_ms"],
                    "policy": probe["later_policy"], "misfired_at_ms": probe["later_decided_at_ms"],
                    "now_ms": self.now_ms})
            elif probe["run_id"] is None:
                self._run("notify_recovery_checked", {**key, "due_at_ms": due,
                                                      "now_ms": self.now_ms})
            else:
                self._recovered(watch, probe)
                self._run("notify_recovery_delete", {**key, "due_at_ms": due})
                recovered += 1
        return recovered

    def _recovered(self, watch: Row, probe: Row) -> None:
        project, trigger = watch["project_id"], watch["trigger_id"]
        source_key = recovery_key(project, trigger, int(watch["trigger_revision"]),
                                  int(watch["due_at_ms"]))
        at = int(probe["run_created_at_ms"])
        event = NotifyEvent(
            event=RuleEvent.RECOVERED.wire, source_key=source_key, occurred_at_ms=at,
            project_id=project, task_id=probe["task_id"], trigger_id=trigger,
            recovery=RecoveryFacts(misfire_due_at_ms=int(watch["due_at_ms"]),
                                   misfire_policy=watch["policy"], run_id=probe["run_id"],
                                   scheduled_for_ms=int(probe["scheduled_for_ms"])))
        for row in self._all("notify_recovery_channels", {
                "project_id": project, "task_id": probe["task_id"], "at_ms": at,
                "source_key": source_key}):
            self._insert(event, row)

    # -- delivering ---------------------------------------------------------------------

    def claim(self, params: OutboxClaimParams) -> ClaimedDelivery | None:
        """Lease the next due delivery for one attempt (None: nothing is due)."""
        skip = json.dumps(sorted(params.skip_channels))
        for _ in range(CLAIM_TRIES):
            row = self._one("notify_outbox_due", {"now_ms": self.now_ms, "skip": skip})
            if row is None:
                return None
            token = self._new_id()
            try:
                spec = spec_from_stored(row["channel"], row["kind"], row["config_json"])
            except RecordCorrupt as exc:
                self._lease(row["id"], params.owner, token, CORRUPT_RETRY_MS)
                self.record(OutboxRecordParams(delivery_id=row["id"], token=token, ok=False,
                                               status_code=None, detail=exc.message,
                                               retry_in_ms=CORRUPT_RETRY_MS))
                continue
            leased = self._lease(row["id"], params.owner, token, spec.lease_ms)
            if leased is None:
                return None
            return ClaimedDelivery(delivery=delivery_from_row(leased),
                                   payload=json_value(row["payload"]), spec=spec,
                                   secret=row["secret"], token=token)
        return None

    def _lease(self, delivery_id: str, owner: str, token: str, lease_ms: int) -> Row | None:
        return self._one("notify_outbox_lease", {
            "id": delivery_id, "owner": owner, "token": token,
            "lease_until_ms": self.now_ms + lease_ms, "now_ms": self.now_ms})

    def record(self, params: OutboxRecordParams) -> Delivery | None:
        common = {"id": params.delivery_id, "token": params.token,
                  "status_code": params.status_code, "now_ms": self.now_ms}
        if params.ok:
            row = self._one("notify_outbox_delivered", common)
        else:
            row = self._one("notify_outbox_failed", {
                **common, "error": params.detail[:MAX_ERROR] or "failed",
                "retry_in_ms": max(0, params.retry_in_ms)})
        return None if row is None else delivery_from_row(row)

    def maintain(self, params: OutboxMaintainParams) -> MaintainReport:
        now = {"now_ms": self.now_ms}
        orphaned = self._run("notify_outbox_orphaned", now)
        exhausted = self._run("notify_outbox_exhausted", now)
        purged = 0
        if params.retention_ms is not None:
            purged = self._run("notify_outbox_purge", {
                "before_ms": self.now_ms - params.retention_ms, "limit": params.purge_limit})
        return MaintainReport(orphaned=orphaned, exhausted=exhausted, purged=purged)

    def next_due_in_ms(self, skip_channels: tuple[str, ...] = ()) -> int | None:
        row = self._one("notify_outbox_next_due", {"skip": json.dumps(sorted(skip_channels))})
        if row is None or row["next_ms"] is None:
            return None
        return max(0, int(row["next_ms"]) - self.now_ms)

    # -- reading deliveries ---------------------------------------------------------------

    def delivery_list(self, params: DeliveryListParams) -> list[Delivery]:
        return [delivery_from_row(row) for row in self._all("notify_delivery_list", {
            "status": None if params.status is None else params.status.value,
            "channel": params.channel, "limit": params.limit})]

    def delivery_find(self, prefix: str) -> Delivery:
        rows = self._all("notify_delivery_find", {"prefix": prefix.lower()})
        if not rows:
            raise NotFound("delivery", prefix)
        if len(rows) > 1:
            raise InvalidInput("delivery", f"{prefix!r} starts several delivery ids; give more "
                                           "of the id")
        return delivery_from_row(rows[0])

    def delivery_retry(self, prefix: str) -> Delivery:
        delivery = self.delivery_find(prefix)
        if delivery.status is not DeliveryStatus.DEAD:
            raise Conflict(f"delivery {delivery.id} is {delivery.status.value}; only a dead "
                           "delivery can be retried")
        self._run("notify_delivery_retry", {"id": delivery.id, "now_ms": self.now_ms})
        return self.delivery_find(delivery.id)


def probe(tx: Tx, params: OutboxProbeParams) -> OutboxProbe:
    """Whether a dispatcher cycle could have work: one statement, outside any transaction
    the caller need open, on the store's clock.

    Each step's condition mirrors what the step itself does: ``enqueue`` starts a source's
    cursor once a rule exists and then pages the rows after its frontier and those leaving
    the settle window (a cursor moving over no rows is left for a later cycle: a later page
    covers the same range); ``recoveries`` notifies, moves or forgets a watch only when its
    trigger was deleted, misfired again or fired on time (otherwise it would only stamp it
    looked at); ``deliver`` leases what ``claim`` would; the tidy and purge counts are asked
    for only when they are due."""
    row = tx.one("notify_probe", {
        **tx.clock_args(), "settle_ms": params.settle_ms,
        "skip": json.dumps(sorted(params.skip_channels)), "tidy": params.tidy,
        "retention_ms": params.retention_ms, "origin": EXECUTION_ORIGIN_SCHEDULED})
    assert row is not None  # one row, always
    now = int(row["now_ms"])
    next_ms = optional_int(row["next_attempt_at_ms"])
    return OutboxProbe(
        enqueue=bool(row["enqueue_start"] or row["outcomes"] or row["misfires"]),
        progress=bool(row["progress"]), recoveries=bool(row["recoveries"]),
        unplaceable=bool(row["unplaceable"]), running_long=bool(row["running_long"]),
        late_start=bool(row["late_start"]),
        deliver=next_ms is not None and next_ms <= now,
        tidy=bool(row["tidy"]), purge=bool(row["purge"]),
        next_due_in_ms=None if next_ms is None else max(0, next_ms - now))

