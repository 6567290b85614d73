"""The dispatcher: one paced loop per `ql serve` and per `ql control` replica.

A cycle starts with a probe: one statement (on PostgreSQL one auto-committed SELECT) that
tells whether any step below could have work. When none could, the cycle ends there (an idle
replica sends one statement a cycle); otherwise every step runs, each bounded and each
failure reported and left for the next cycle:

1. tidy (every 30 s): deliveries of removed channels, and last attempts whose sender vanished,
   end ``dead``; delivered and dead rows past the retention are deleted (hourly);
2. enqueue: Run outcomes (and, while a rule asks for them, starts and successes) and
   misfires that rules want become outbox rows (a page per source);
3. recoveries: triggers that misfired and have since fired on time are notified;
4. walks (each every 15 s, while the probe says a Run has waited long enough): a page of
   up to 500 queued Runs that require worker labels is looked at, and each no live worker
   can take that has waited out a rule's delay is enqueued once per channel (unplaceable);
   so are the running Runs whose attempt has run longer than a rule's delay (running_long)
   and the queued Runs not started that long after their scheduled time (late_start). A
   full page goes on from where it ended at the next cycle, the end starts the next pass
   over from the oldest. This step never makes a probe "busy": a Run reported once stays
   in its state, and asking about it every second would defeat the quiet pause;
5. deliver: up to 16 deliveries, one leased row at a time (bounded by a time budget too).
   A failed delivery waits out its channel's backoff before its next attempt, and the channel
   cools down for as long: its other deliveries wait too, so a receiver that is down gets one
   attempt per backoff from this dispatcher, not one per waiting notification.

It runs on its own thread with its own connection, so a slow receiver or a slow scan never
holds up the scheduler. While probes keep finding nothing the pause between cycles doubles,
from the interval up to ``idle_max_s`` (5 s), and the first cycle that finds work brings it
back to the interval: a quiet replica sends one probe per 5 s instead of one per second, and
the first notification after a quiet spell waits at most that long.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from qinglong.clock import Clock
from qinglong.diagnostics import Diagnostic, DiagnosticSink, diagnostic_from, emit
from qinglong.domain.notify.channels import JITTER
from qinglong.domain.notify.model import ClaimedDelivery, DeliveryStatus
from qinglong.errors import PermissionDenied, StorageError
from qinglong.notify.senders import Sender, SendResult
from qinglong.storage.notify import NotifyStore
from qinglong.storage.notify.params import (
    OutboxClaimParams,
    OutboxEnqueueParams,
    OutboxMaintainParams,
    OutboxProbe,
    OutboxProbeParams,
    OutboxRecordParams,
    UnplaceableParams,
)

SOURCE = "notify"
# The walks over Runs in a state, each on its own pace (storage/notify/unplaceable.py and
# deadlines.py).
WALKS = frozenset({"unplaceable", "running_long", "late_start"})
DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifySettings:
    interval_s: float = 1.0
    idle_max_s: float = 5.0  # the longest pause after probes that found nothing
    settle_ms: int = 300_000  # a source row is looked at again once it is this old
    scan_limit: int = 200  # source rows per page
    recovery_limit: int = 32  # waiting triggers looked at per cycle
    deliveries_per_cycle: int = 16
    send_budget_s: float = 20.0  # no new attempt starts after this long in one cycle
    tidy_every_s: float = 30.0
    purge_every_s: float = 3600.0
    retention_ms: int = 30 * DAY_MS  # delivered and dead rows are kept this long
    # a pass of each walk (unplaceable, running_long, late_start) starts this often
    unplaceable_every_s: float = 15.0
    unplaceable_limit: int = 500  # Runs looked at per page of a walk


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifyReport:
    enqueued: int = 0
    recovered: int = 0
    delivered: int = 0
    failed: int = 0
    dead: int = 0
    saturated: bool = False
    next_due_in_ms: int | None = None


def _with_cooling(due: int | None, cooling: dict[str, float]) -> int | None:
    """The next delivery due with the ``cooling`` channels left out, or the end of the first
    cool-down if that comes sooner."""
    if cooling:
        ends = int(min(cooling.values()) * 1000)
        due = ends if due is None else min(due, ends)
    return due


def _jitter() -> float:
    return random.uniform(*JITTER)  # noqa: S311 - spreads retries, not security


class Dispatcher:
    def __init__(self, store: NotifyStore, sender: Sender, clock: Clock, *, owner: str,
                 settings: NotifySettings | None = None,
                 diagnostics: DiagnosticSink | None = None,
                 jitter: Callable[[], float] = _jitter) -> None:
        self._store = store
        self._sender = sender
        self._clock = clock
        self._owner = owner
        self._settings = settings or NotifySettings()
        self._diagnostics = diagnostics
        self._jitter = jitter
        self._tidied_at: float | None = None
        self._purged_at: float | None = None
        self._cooling: dict[str, float] = {}  # channel -> monotonic time it may be tried again
        self._saturated = False  # the last cycle left work waiting: no need to ask
        self._quiet = 0  # probes in a row that found nothing to do
        # per walk (unplaceable, running_long, late_start): when its last pass began, and
        # where its next page starts
        self._walk_at: dict[str, float] = {}
        self._walk_from: dict[str, tuple[int, str] | None] = {}

    def _report(self, code: str, message: str) -> None:
        emit(self._diagnostics, Diagnostic(source=SOURCE, code=code, message=message))

    def run_cycle(self, stop_requested: Callable[[], bool] = lambda: False) -> NotifyReport:
        """One bounded cycle. The probe comes first (unless the last cycle was saturated):
        when no step could have work the cycle ends with it. A step that fails is reported
        and the next one still runs; a database that fails (or refuses a privilege) ends the
        cycle: the rest would fail the same way, and the next cycle tries again."""
        if self._saturated:
            return self._full_cycle(stop_requested, walks=WALKS)
        try:
            probe, cooling = self._probe()
        except (StorageError, PermissionDenied) as exc:
            self._quiet = 0  # look again at the interval once the database answers
            emit(self._diagnostics, diagnostic_from(SOURCE, exc))
            return NotifyReport()
        except Exception as exc:  # noqa: BLE001 - unsure whether there is work: do the cycle
            emit(self._diagnostics, diagnostic_from(SOURCE, exc))
            probe, cooling = None, {}
        asked, found = WALKS if probe is None else probe.walks, 0
        if probe is not None and probe.idle:
            found = self._walk_steps(asked)
            if not found:
                self._quiet += 1
                return NotifyReport(next_due_in_ms=_with_cooling(probe.next_due_in_ms, cooling))
            asked = frozenset()  # it found something to send: the full cycle sends it
        self._quiet = 0
        return self._full_cycle(stop_requested, walks=asked, enqueued=found)

    def _walk_steps(self, asked: frozenset[str]) -> int:
        """A page of each walk over Runs in a state (unplaceable, running_long, late_start):
        what they enqueued."""
        return sum(self._walk_step(walk, walk in asked) for walk in sorted(WALKS))

    def _walk_step(self, walk: str, asked: bool) -> int:
        """A page of the walk ``walk``, when the probe says a Run has waited long enough
        (``asked``) and a page is due; what it enqueued. A failure is reported and the walk
        goes on at its next pace."""
        now = self._clock.monotonic()
        if not asked:
            self._walk_from[walk] = None  # nothing waits long enough: the next pass restarts
            return 0
        start = self._walk_from.get(walk)
        began = self._walk_at.get(walk)
        if start is None and began is not None and now - began < self._settings.unplaceable_every_s:
            return 0
        if start is None:
            self._walk_at[walk] = now
        try:
            report = self._store.outbox_walk(walk, UnplaceableParams(
                after=start, limit=self._settings.unplaceable_limit))
        except Exception as exc:  # noqa: BLE001 - reported; the next pass tries again
            self._walk_from[walk] = None
            emit(self._diagnostics, diagnostic_from(SOURCE, exc))
            return 0
        self._walk_from[walk] = report.next_after
        return report.enqueued

    def quiet_pause_s(self) -> float | None:
        """How long the loop may pause after this many quiet probes in a row: None (the
        interval) after the first, then twice the last pause, at most ``idle_max_s``. A
        delivery due sooner still shortens the pause (the report's next_due_in_ms)."""
        s = self._settings
        if self._quiet < 2:
            return None
        return min(s.interval_s * 2.0 ** min(self._quiet - 1, 16), s.idle_max_s)

    def _probe(self) -> tuple[OutboxProbe, dict[str, float]]:
        """Ask whether the cycle could have work (and the channels cooling down it left out),
        with the tidy's questions only when it is due; a tidy (or purge) due with nothing to
        do counts as done."""
        s, now = self._settings, self._clock.monotonic()
        tidy, purge = self._tidy_due(now)
        cooling = self._cooling_channels()
        probe = self._store.outbox_probe(OutboxProbeParams(
            settle_ms=s.settle_ms, skip_channels=tuple(sorted(cooling)),
            tidy=tidy, retention_ms=s.retention_ms if purge else None))
        if tidy and not (probe.tidy or probe.purge):
            self._tidied_at = now
            if purge:
                self._purged_at = now
        return probe, cooling

    def _full_cycle(self, stop_requested: Callable[[], bool], *, walks: frozenset[str],
                    enqueued: int = 0) -> NotifyReport:
        s = self._settings
        tally = {"enqueued": enqueued, "recovered": 0, "delivered": 0, "failed": 0, "dead": 0,
                 "saturated": 0}

        def enqueue() -> None:
            report = self._store.outbox_enqueue(OutboxEnqueueParams(settle_ms=s.settle_ms,
                                                                    limit=s.scan_limit))
            tally["enqueued"] += report.enqueued
            tally["saturated"] |= report.saturated

        def recoveries() -> None:
            tally["recovered"] = self._store.outbox_recoveries(s.recovery_limit)

        def unplaceable_runs() -> None:
            if walks:
                tally["enqueued"] += self._walk_steps(walks)

        next_due = None
        try:
            for step in (self._tidy, enqueue, recoveries, unplaceable_runs,
                         lambda: self._deliver(stop_requested, tally)):
                try:
                    step()
                except (StorageError, PermissionDenied):
                    raise
                except Exception as exc:  # noqa: BLE001 - one step never blocks the others
                    emit(self._diagnostics, diagnostic_from(SOURCE, exc))
            next_due = self._next_due()
        except (StorageError, PermissionDenied) as exc:
            emit(self._diagnostics, diagnostic_from(SOURCE, exc))
        self._saturated = bool(tally["saturated"])
        return NotifyReport(enqueued=tally["enqueued"], recovered=tally["recovered"],
                            delivered=tally["delivered"], failed=tally["failed"],
                            dead=tally["dead"], saturated=bool(tally["saturated"]),
                            next_due_in_ms=next_due)

    def _cooling_channels(self) -> dict[str, float]:
        now = self._clock.monotonic()
        self._cooling = {name: until for name, until in self._cooling.items() if until > now}
        return {name: until - now for name, until in self._cooling.items()}

    def _next_due(self) -> int | None:
        cooling = self._cooling_channels()
        return _with_cooling(self._store.outbox_next_due_in_ms(tuple(sorted(cooling))), cooling)

    def _tidy_due(self, now: float) -> tuple[bool, bool]:
        """Whether the tidy is due at ``now`` (monotonic), and its purge."""
        s = self._settings
        if self._tidied_at is not None and now - self._tidied_at < s.tidy_every_s:
            return False, False
        return True, self._purged_at is None or now - self._purged_at >= s.purge_every_s

    def _tidy(self) -> None:
        s, now = self._settings, self._clock.monotonic()
        due, purge = self._tidy_due(now)
        if not due:
            return
        self._tidied_at = now
        if purge:
            self._purged_at = now
        report = self._store.outbox_maintain(OutboxMaintainParams(
            retention_ms=s.retention_ms if purge else None))
        if report.exhausted:
            self._report("QL_NOTIFY_DEAD", f"{report.exhausted} notification(s) ended dead: "
                                           "the sender of their last attempt stopped")

    def _deliver(self, stop_requested: Callable[[], bool], tally: dict[str, int]) -> None:
        s = self._settings
        started = self._clock.monotonic()
        for _ in range(s.deliveries_per_cycle):
            if stop_requested() or self._clock.monotonic() - started > s.send_budget_s:
                tally["saturated"] = 1
                return
            claimed = self._store.outbox_claim(OutboxClaimParams(
                owner=self._owner, skip_channels=tuple(sorted(self._cooling_channels()))))
            if claimed is None:
                return
            self._attempt(claimed, tally)
        tally["saturated"] = 1  # it used its whole budget: more may be due

    def _attempt(self, claimed: ClaimedDelivery, tally: dict[str, int]) -> bool:
        delivery = claimed.delivery
        try:
            result = self._sender.send(claimed.spec, claimed.secret, claimed.payload)
        except Exception as exc:  # noqa: BLE001 - a template that cannot be filled, a bug
            result = SendResult(ok=False, status=None, elapsed_ms=0,
                                detail=diagnostic_from(SOURCE, exc).message)
        retry_in = 0 if result.ok else claimed.spec.retry.delay_ms(delivery.attempts,
                                                                   self._jitter())
        recorded = self._store.outbox_record(OutboxRecordParams(
            delivery_id=delivery.id, token=claimed.token, ok=result.ok,
            status_code=result.status, detail=result.detail, retry_in_ms=retry_in))
        what = f"notification {delivery.id} ({delivery.event}) to {delivery.channel}"
        if recorded is None:
            self._report("QL_NOTIFY_LEASE_LOST", f"{what}: its lease ran out while it was being "
                                                 "sent; it will be sent again")
        if result.ok:
            tally["delivered"] += 1
            self._cooling.pop(delivery.channel, None)
            return True
        tally["failed"] += 1
        self._cooling[delivery.channel] = self._clock.monotonic() + retry_in / 1000
        if recorded is not None and recorded.status is DeliveryStatus.DEAD:
            tally["dead"] += 1
            self._report("QL_NOTIFY_DEAD", f"{what} failed its last attempt "
                                           f"({recorded.attempts} of {recorded.max_attempts}): "
                                           f"{result.detail}; it is dead "
                                           "(`ql notify retry` sends it again)")
        else:
            self._report("QL_NOTIFY_RETRY", f"{what} failed (attempt {delivery.attempts} of "
                                            f"{delivery.max_attempts}): {result.detail}; next "
                                            f"attempt in {retry_in / 1000:.1f} s")
        return False
