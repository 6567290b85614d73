"""Where the audit window ends when ``--to`` does not say: after the last evidence that a
scheduler ran (a running scheduler's now, its clean stop, its last heartbeat or the latest
scheduling decision), so that occurrences nothing could have decided yet are not judged."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from qinglong.audit.model import AuditInput, InstanceRecord
from qinglong.domain.runs import TRIGGER_TYPE_BACKFILL
from qinglong.loops import MAX_INTERVAL_S

# When is a scheduler that did not stop cleanly no longer running? `ql serve` heartbeats after
# its cycles (at most every 5 s, HEARTBEAT_INTERVAL_S in profiles.local), `ql control` every
# 5 s on a thread of its own (profiles.registration), and each starts a cycle at least once per
# its cadence: `ql serve --interval` and `ql control
# --interval-ms` allow up to loops.MAX_INTERVAL_S (1 h). The instances table records no
# cadence, so only a scheduler silent for longer than the longest cadence plus a margin (a
# slow cycle, the beat throttle) is judged not running; one silent for less is presumed
# running, and the report says so when it has been silent for more than RECENT_HEARTBEAT_MS.
SCHEDULER_ROLES = ("serve", "control")
HEARTBEAT_MARGIN_MS = 60_000
STALE_HEARTBEAT_MS = int(MAX_INTERVAL_S * 1000) + HEARTBEAT_MARGIN_MS
RECENT_HEARTBEAT_MS = 20_000  # a scheduler cycling every second or so beats within this

# What ended the window (AuditReport.end_source).
END_SOURCES = {
    "option": "--to",
    "now": "the database's now: a scheduler is running",
    "stop": "the latest clean stop of a scheduler",
    "heartbeat": "the latest heartbeat of a scheduler that did not stop cleanly",
    "decision": "the latest scheduling decision (a Run admitted or a misfire recorded)",
    "no-scheduler": "no trace of any scheduler: nothing is required",
}



@dataclass(frozen=True, slots=True)
class WindowEnd:
    """The window's default end, what set it (a key of END_SOURCES) and what to tell the user."""

    at_ms: int
    source: str
    note: str


def _last_decision_ms(data: AuditInput) -> int | None:
    """When a scheduler last decided something: the latest Run admission or misfire record
    (read alike from both databases)."""
    return max(itertools.chain((run.created_at_ms for run in data.runs
                                if run.trigger_type != TRIGGER_TYPE_BACKFILL),
                               (misfire.decided_at_ms for misfire in data.misfires)), default=None)


def ago(data: AuditInput, at_ms: int) -> str:
    return f"{max(0, data.now_ms - at_ms) / 1000:.0f} s ago"


def default_end(data: AuditInput) -> WindowEnd:
    """Where the window ends without ``--to``: nothing can have been decided after the last
    evidence that a scheduler ran, so occurrences after it are not judged.

    * a scheduler is running (no clean stop, heartbeat within STALE_HEARTBEAT_MS): now;
    * schedulers ran but none runs now: the later of their last clean stop or heartbeat and
      the latest scheduling decision (a crash can follow decisions the heartbeat missed);
    * no scheduler ever wrote a heartbeat (a database from before the instances table, or no
      `ql serve` / `ql control` ran): the latest scheduling decision;
    * no trace of a scheduler at all: the earliest publish (nothing is required).
    """
    now = data.now_ms
    decided = _last_decision_ms(data)
    schedulers = [i for i in data.instances if i.role in SCHEDULER_ROLES]
    if not schedulers:
        if decided is None:
            first = min((r.published_at_ms for r in data.revisions), default=now)
            return WindowEnd(min(now, first), "no-scheduler",
                             "no scheduler has left a trace (no heartbeat, no Run, no misfire "
                             "decision): nothing is required (use --to to choose an end)")
        return WindowEnd(min(now, decided), "decision",
                         "no scheduler heartbeats are recorded (a database from an older "
                         "version, or no `ql serve`/`ql control` ran): the window ends at the "
                         f"latest scheduling decision, {ago(data, decided)} "
                         "(use --to to choose another end)")
    running = [i for i in schedulers
               if i.stopped_at_ms is None and now - i.seen_at_ms <= STALE_HEARTBEAT_MS]
    if running:
        latest = max(running, key=lambda i: i.seen_at_ms)
        note = f"a scheduler is running ({latest.instance_id}, last seen {ago(data, latest.seen_at_ms)}): the window ends now"
        if now - latest.seen_at_ms > RECENT_HEARTBEAT_MS:
            note += (f"; it is presumed running because a scheduler may cycle as rarely as once "
                     f"per {MAX_INTERVAL_S:.0f} s (--interval) and counts as gone only after "
                     f"{STALE_HEARTBEAT_MS // 1000} s of silence; if it crashed, use --to to end "
                     "the window where it stopped")
        return WindowEnd(now, "now", note)
    last: InstanceRecord = max(schedulers, key=lambda i: i.stopped_at_ms or i.seen_at_ms)
    last_ms = last.stopped_at_ms or last.seen_at_ms
    if decided is not None and decided > last_ms:
        at, source, what = decided, "decision", "the latest scheduling decision, after the last heartbeat"
    elif last.stopped_at_ms is not None:
        at, source, what = last_ms, "stop", f"the clean stop of {last.instance_id}"
    else:
        at, source, what = last_ms, "heartbeat", f"the last heartbeat of {last.instance_id} (no clean stop)"
    return WindowEnd(min(now, at), source,
                     f"no scheduler is running: the window ends where one last ran, at {what}, "
                     f"{ago(data, at)} (use --to to choose another end)")


