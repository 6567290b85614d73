"""Retention of scheduling history: how long claim records and the events of ended Runs are
kept (docs/retention.md).

Claim records (``trigger_schedule_claims``, PostgreSQL only) and Run events (``run_events``)
are append-only and would grow without bound. The reconciler of every `ql control` replica
and of `ql serve` deletes, in small batches, what is older than the horizon ``now -
retention`` (by the database clock on PostgreSQL, the injected clock on SQLite):

* a claim acquired and expired before the horizon that is not the latest claim of its
  schedule row and whose trigger has no unfinished Run admitted before the horizon;
* every event of a Run that ended (succeeded, failed, cancelled, timed out: statuses no
  transition leaves) before the horizon. Runs themselves, their Attempts and misfire records
  are kept, so occurrence uniqueness (the idempotency key) holds for ever.

``0`` days keeps everything for ever. Every delete records its horizon in ``retention_marks``
in the same transaction, so `ql audit` tells pruned evidence (before the mark) from missing
evidence (a violation) whatever retention the schedulers ran with.
"""

from __future__ import annotations

from dataclasses import dataclass

from qinglong.errors import InvalidConfig

DEFAULT_RETENTION_DAYS = 30
MIN_RETENTION_DAYS = 1
MAX_RETENTION_DAYS = 3650
KEEP_FOREVER = 0
DAY_MS = 86_400_000
MIN_RETENTION_MS = MIN_RETENTION_DAYS * DAY_MS
# A wall clock that moved this much further than the monotonic clock between two passes
# jumped: the pass is skipped (a wrong clock would delete recent history for good), until
# the new clock has held for CLOCK_JUMP_PATIENCE passes (about an hour).
CLOCK_JUMP_TOLERANCE_MS = 3_600_000
CLOCK_JUMP_PATIENCE = 60

# One pass (every 30 reconciler cycles, about a minute): at most this many statements per
# table, each deleting at most a batch, each its own short transaction (~20-40 ms for a
# batch on a 2-core machine). That caps pruning at 60,000 rows a minute per table (~1,000/s,
# shared by all replicas), above the steady admission rates the defaults are sized for; a
# larger backlog (e.g. a first pass on an old database) takes several passes.
PRUNE_BATCH = 2_000
PRUNE_STATEMENTS = 30


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What one pass deleted, and how many statements it took."""

    claims: int = 0
    events: int = 0
    statements: int = 0

    @property
    def deleted(self) -> int:
        return self.claims + self.events


def check_retention_days(days: int, option: str = "retention-days") -> int:
    """The number of days, or InvalidConfig naming ``option``."""
    if isinstance(days, bool) or not isinstance(days, int):
        raise InvalidConfig(option, "must be a whole number of days")
    if days != KEEP_FOREVER and not MIN_RETENTION_DAYS <= days <= MAX_RETENTION_DAYS:
        raise InvalidConfig(option, f"must be {KEEP_FOREVER} (keep for ever) or between "
                                    f"{MIN_RETENTION_DAYS} and {MAX_RETENTION_DAYS} days")
    return days


def retention_ms(days: int) -> int | None:
    """The retention in milliseconds, or None when nothing is ever pruned."""
    return None if days == KEEP_FOREVER else check_retention_days(days) * DAY_MS


def trusted_mark(mark_ms: int | None, now_ms: int) -> int | None:
    """A retention mark as `ql audit` believes it: no retention is shorter than a day, so a
    mark later than ``now - MIN_RETENTION`` came from a clock that ran ahead; beyond that
    instant, missing evidence is judged missing."""
    return None if mark_ms is None else min(mark_ms, now_ms - MIN_RETENTION_MS)
