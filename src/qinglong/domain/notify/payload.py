"""The notification: one JSON document per delivery, versioned by its ``schema`` field.

Shape ``qinglong/notification@v1`` (docs/controls/notifications.md has the reference): every
key is always present, ``null`` when it does not apply; a later version may add keys, never
change or remove one. ``id`` is the delivery's idempotency id: the same on every retry of one
notification to one channel, so a receiver that keeps the ids it has seen processes each
notification once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from qinglong.domain.durations import format_duration
from qinglong.domain.instants import rfc3339
from qinglong.domain.notify.events import TEST_EVENT

SCHEMA = "qinglong/notification@v1"
MAX_TEXT = 1000  # summaries are cut to this many characters


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFacts:
    id: str
    status: str
    task_name: str | None
    origin: str
    requested_by: str | None
    scheduled_for_ms: int | None
    created_at_ms: int
    started_at_ms: int | None
    finished_at_ms: int | None
    attempts: int
    exit_code: int | None
    error_code: str | None
    error_summary: str | None
    cancel_reason: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MisfireFacts:
    trigger_revision: int
    policy: str  # skip | fire_once
    due_at_ms: int  # the first occurrence that was late
    skipped_through_ms: int  # the last occurrence the decision dropped
    next_fire_at_ms: int  # where the schedule went on
    run_id: str | None  # fire_once: the one Run admitted for the late occurrence
    decided_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryFacts:
    misfire_due_at_ms: int  # the misfire this recovers from
    misfire_policy: str
    run_id: str  # the first Run admitted on time after it
    scheduled_for_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementFacts:
    """Why a queued Run waits: no live worker offers the labels it requires."""

    requires: tuple[str, ...]  # the labels the Run requires (KEY or KEY=VALUE)
    reason: str  # "no live worker offers gpu, region=us"
    queued_at_ms: int  # since when it is queued
    waited_ms: int  # how long it had waited when it was found
    after_ms: int  # the rule's delay it waited longer than


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadlineFacts:
    """How late a Run is: ``run.running_long`` (still running since its attempt started) or
    ``run.late_start`` (not started since its scheduled time)."""

    since_ms: int  # the attempt's start, or the scheduled time (a manual Run: when asked for)
    waited_ms: int  # how long since then, when it was found
    after_ms: int  # the rule's delay it has run out


@dataclass(frozen=True, slots=True, kw_only=True)
class NotifyEvent:
    """Something a rule can be told about, as the dispatcher found it in the database."""

    event: str  # wire name: run.failed, trigger.misfired, ...
    source_key: str  # what happened, once: a channel is told about it at most once
    occurred_at_ms: int
    project_id: str
    task_id: str | None
    trigger_id: str | None
    run: RunFacts | None = None
    misfire: MisfireFacts | None = None
    recovery: RecoveryFacts | None = None
    placement: PlacementFacts | None = None  # run.unplaceable (with ``run``)
    deadline: DeadlineFacts | None = None  # run.running_long, run.late_start (with ``run``)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "..."


def _subject(event: NotifyEvent) -> str:
    if event.event.startswith("trigger."):
        return f"trigger {event.project_id}/{event.trigger_id}"
    return f"{event.project_id}/{event.task_id}"


def title_and_summary(event: NotifyEvent, channel: str) -> tuple[str, str]:
    if event.event == TEST_EVENT:
        return ("qinglong: test notification",
                f"A test notification from qinglong to channel {channel!r}: it arrived.")
    subject = _subject(event)
    if event.placement is not None and event.run is not None:
        p, run = event.placement, event.run
        return (f"qinglong: {subject} waits for a worker",
                _cut(f"Run {run.id} of {subject} has been queued for "
                     f"{format_duration(p.waited_ms // 1000 * 1000)} (longer than "
                     f"{format_duration(p.after_ms)}): {p.reason}. It stays queued until a "
                     f"worker with these labels runs (ql worker --labels)."))
    if event.deadline is not None and event.run is not None:
        return _deadline(event, event.deadline, event.run, subject)
    if event.run is not None:
        run = event.run
        verb = {"failed": "failed", "timed_out": "timed out", "lost": "was lost",
                "cancelled": "was cancelled", "running": "started"}.get(run.status, run.status)
        detail = []
        if run.exit_code is not None:
            detail.append(f"exit {run.exit_code}")
        if run.cancel_reason:
            detail.append(f"reason {run.cancel_reason}")
        detail.append(f"attempt {run.attempts}" if run.status == "running"
                      else f"{run.attempts} attempt{'s' if run.attempts != 1 else ''}")
        when = (f" for {rfc3339(run.scheduled_for_ms)}" if run.scheduled_for_ms is not None
                else "")
        text = f"Run {run.id} of {subject}{when} {verb} ({', '.join(detail)})"
        if run.error_summary:
            text += f": {run.error_summary}"
        return f"qinglong: {subject} {verb}", _cut(text)
    if event.misfire is not None:
        m = event.misfire
        dropped = ("one Run was admitted late for it" if m.policy == "fire_once"
                   else "it was skipped")
        return (f"qinglong: {subject} misfired",
                _cut(f"The occurrence of {subject} due {rfc3339(m.due_at_ms)} was too late to run "
                     f"on time (misfire policy {m.policy}: {dropped}; occurrences through "
                     f"{rfc3339(m.skipped_through_ms)} were not run on time); the next is "
                     f"{rfc3339(m.next_fire_at_ms)}."))
    if event.recovery is not None:
        r = event.recovery
        return (f"qinglong: {subject} recovered",
                _cut(f"{subject} fired on time again for {rfc3339(r.scheduled_for_ms)} (Run "
                     f"{r.run_id}) after it misfired at {rfc3339(r.misfire_due_at_ms)}."))
    return f"qinglong: {event.event} {subject}", _cut(f"{event.event} for {subject}")


def _deadline(event: NotifyEvent, d: DeadlineFacts, run: RunFacts,
              subject: str) -> tuple[str, str]:
    waited = format_duration(d.waited_ms // 1000 * 1000)
    if event.event == "run.running_long":
        return (f"qinglong: {subject} still running",
                _cut(f"Run {run.id} of {subject} has been running for {waited} (longer than "
                     f"{format_duration(d.after_ms)}) since its attempt {run.attempts} started "
                     f"at {rfc3339(d.since_ms)}."))
    return (f"qinglong: {subject} has not started",
            _cut(f"Run {run.id} of {subject} has not started {waited} after "
                 f"{rfc3339(d.since_ms)} (longer than {format_duration(d.after_ms)}); it is "
                 f"still queued."))


def build(event: NotifyEvent, *, delivery_id: str, channel: str) -> dict[str, Any]:
    """The document one channel receives for ``event``."""
    title, summary = title_and_summary(event, channel)
    return {
        "schema": SCHEMA,
        "id": delivery_id,
        "event": event.event,
        "channel": channel,
        "occurred_at": rfc3339(event.occurred_at_ms),
        "occurred_at_ms": event.occurred_at_ms,
        "project": event.project_id,
        "task": event.task_id,
        "trigger": event.trigger_id,
        "title": title,
        "summary": summary,
        "run": None if event.run is None else asdict(event.run),
        "misfire": None if event.misfire is None else asdict(event.misfire),
        "recovery": None if event.recovery is None else asdict(event.recovery),
        "placement": None if event.placement is None else {
            **asdict(event.placement), "requires": list(event.placement.requires)},
        "deadline": None if event.deadline is None else asdict(event.deadline),
    }


def probe_event(now_ms: int) -> NotifyEvent:
    return NotifyEvent(event=TEST_EVENT, source_key=f"{TEST_EVENT}:{now_ms}",
                       occurred_at_ms=now_ms, project_id="", task_id=None, trigger_id=None)


def body(payload: Mapping[str, Any] | list[Any]) -> bytes:
    """The bytes sent (and signed): compact JSON with sorted keys, UTF-8."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def template_values(payload: Mapping[str, Any], *, secret: str | None,
                    params: Mapping[str, str]) -> dict[str, str]:
    """What ``{name}`` stands for in a template channel."""
    run = payload.get("run") or {}
    error = (run.get("error_summary") or run.get("error_code")
             or (payload.get("placement") or {}).get("reason") or "")
    status = run.get("status") or str(payload["event"]).rpartition(".")[2]
    values = {
        "event": str(payload["event"]),
        "title": str(payload["title"]),
        "summary": str(payload["summary"]),
        "project": str(payload.get("project") or ""),
        "task": str(payload.get("task") or ""),
        "trigger": str(payload.get("trigger") or ""),
        "run_id": str(run.get("id") or (payload.get("recovery") or {}).get("run_id") or ""),
        "status": str(status),
        "error": str(error),
        "occurred_at": str(payload.get("occurred_at") or ""),
        "delivery_id": str(payload["id"]),
        "channel": str(payload["channel"]),
        **params,
    }
    if secret is not None:
        values["secret"] = secret
    return values


def email_text(payload: Mapping[str, Any]) -> str:
    """The plain-text body of the email for ``payload`` (the JSON document follows)."""
    lines = [str(payload["summary"]), ""]
    for label, key in (("event", "event"), ("project", "project"), ("task", "task"),
                       ("trigger", "trigger"), ("at", "occurred_at"), ("delivery", "id")):
        if payload.get(key):
            lines.append(f"{label}: {payload[key]}")
    lines += ["", "-- ", "The notification as JSON (" + SCHEMA + "):",
              json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False)]
    return "\n".join(lines) + "\n"
