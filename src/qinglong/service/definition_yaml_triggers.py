"""The triggers of a definitions file: ``triggers.<id>`` mappings to :class:`DesiredTrigger`
(a cron, interval or one-shot schedule, its zone, DST policy, jitter and policies)."""

from __future__ import annotations

from qinglong.domain.cron import (
    CronSchedule,
    DstGap,
    DstPolicy,
    check_dst_applies,
    normalize_expression,
)
from qinglong.domain.identifiers import entity_id
from qinglong.domain.interval import IntervalSchedule, check_every
from qinglong.domain.jitter import Jitter
from qinglong.domain.occurrences import parse_instant
from qinglong.domain.once import OnceSchedule
from qinglong.domain.parameters import trigger_values
from qinglong.domain.timezones import UTC_NAME, canonical_timezone
from qinglong.domain.trigger import (
    DEFAULT_QUEUE_LIMIT,
    MisfirePolicy,
    Overlap,
    OverlapPolicy,
    ScheduleKind,
    TriggerSpec,
)
from qinglong.errors import InvalidInput
from qinglong.service.definition_model import DesiredTrigger, Issues, Where
from qinglong.service.definition_yaml_nodes import Fields, YMap

TRIGGER_KEYS = ("task", "cron", "every", "anchor", "at", "timezone", "dst_gap", "dst_overlap",
                "jitter", "jitter_random", "misfire", "overlap", "overlap_queue_limit",
                "flow", "parameters", "enabled")


def _schedule(fields: Fields, zone: str | None) -> tuple[ScheduleKind | None, bool]:
    """The trigger's schedule (exactly one of cron, every with anchor, at) and whether an
    interval's anchor is left to the publish (see DesiredTrigger.keep_anchor)."""
    given = [key for key in ("cron", "every", "at") if key in fields.map]
    if len(given) != 1:
        message = ("needs a schedule: cron, every or at" if not given
                   else f"give one schedule, not {' and '.join(given)}")
        fields.fail(given[-1] if given else "cron", message,
                    where=fields.where(given[-1]) if given else fields.where())
        return None, False
    if "anchor" in fields.map and given != ["every"]:
        fields.fail("anchor", "applies only to every")
        return None, False
    for key in ("dst_gap", "dst_overlap"):
        if key in fields.map and given != ["cron"]:
            fields.fail(key, "applies only to cron (every and at follow real elapsed time)")
            return None, False
    if given == ["cron"]:
        cron = fields.text("cron", required=True)
        expression = None if cron is None else fields.attempt(
            "cron", lambda: normalize_expression(cron))
        try:
            dst = DstPolicy.parse(fields.text("dst_gap"), fields.text("dst_overlap"))
        except InvalidInput as exc:
            fields.fail(exc.field.replace("-", "_"), exc.rule)
            return None, False
        if expression is None or zone is None:
            return None, False
        try:
            check_dst_applies(expression, dst)
        except InvalidInput as exc:
            fields.fail("dst_gap" if dst.gap is not DstGap.SHIFT else "dst_overlap",
                        exc.rule.replace("--dst-gap shift --dst-overlap first",
                                         "dst_gap: shift and dst_overlap: first"))
            return None, False
        return CronSchedule(expression, zone, dst), False
    zone = zone or UTC_NAME
    if given == ["at"]:
        text = fields.text("at", required=True)
        at_ms = None if text is None else fields.attempt("at", lambda: parse_instant(text, "at"))
        return (None if at_ms is None else OnceSchedule(at_ms, zone)), False
    every_ms = fields.duration("every")
    if every_ms is None:
        return None, False
    if every_ms % 1000:
        fields.fail("every", "must be whole seconds")
        return None, False
    every_s = fields.attempt("every", lambda: check_every(every_ms // 1000))
    anchor_text = fields.text("anchor")
    anchor_ms = 0 if anchor_text is None else fields.attempt(
        "anchor", lambda: parse_instant(anchor_text, "anchor"))
    if every_s is None or anchor_ms is None:
        return None, False
    return IntervalSchedule(every_s, anchor_ms, zone), anchor_text is None


def _jitter(fields: Fields) -> Jitter | None:
    """``jitter`` (the bound) and ``jitter_random`` (its per-occurrence part), whole seconds."""
    seconds = []
    for key in ("jitter", "jitter_random"):
        value = fields.duration(key)
        if value is not None and value % 1000:
            fields.fail(key, "must be whole seconds")
            value = None
        seconds.append(None if value is None else value // 1000)
    bound, random = seconds
    if bound is None:
        if random is not None:
            fields.fail("jitter_random", "is a part of jitter: give jitter too")
        return None
    try:
        return Jitter.of(bound, random or 0)
    except InvalidInput as exc:
        fields.fail(exc.field.replace("-", "_"), exc.rule.replace("--jitter", "jitter"))
        return None


def _values(fields: Fields) -> tuple[tuple[str, str | int | bool], ...]:
    """``parameters: {who: eve, count: 3}``: the values the trigger gives (checked against its
    task, or its flow's tasks, when it is published)."""
    found = fields.mapping("parameters")
    if found is None:
        return ()
    values = fields.attempt("parameters", lambda: trigger_values(
        {str(k): v for k, v in found.items()}))
    return values or ()


def parse_trigger(project: str, trigger_id: str, mapping: YMap, file: str, issues: Issues,
             where: Where | None) -> DesiredTrigger | None:
    fields = Fields(mapping, file, f"triggers.{trigger_id}", issues, TRIGGER_KEYS)
    task_id = fields.text("task", required=True)
    if task_id is not None:
        fields.attempt("task", lambda: entity_id(task_id, "task"))
    zone_text = fields.text("timezone", required="cron" in mapping)
    zone = None if zone_text is None else fields.attempt(
        "timezone", lambda: canonical_timezone(zone_text))
    schedule, keep_anchor = _schedule(fields, zone)
    misfire_text = fields.text("misfire")
    misfire = fields.attempt("misfire", lambda: MisfirePolicy.parse(misfire_text or "skip"))
    overlap_text = fields.text("overlap")
    policy = fields.attempt("overlap", lambda: OverlapPolicy.parse(overlap_text or "allow"))
    limit = fields.number("overlap_queue_limit")
    overlap = None
    if policy is not None:
        try:
            overlap = Overlap(policy=policy,
                              queue_limit=DEFAULT_QUEUE_LIMIT if limit is None else limit)
        except InvalidInput as exc:
            fields.fail("overlap_queue_limit", exc.rule.replace("--overlap queue",
                                                                "overlap: queue"))
    enabled = fields.flag("enabled", True)
    jitter = _jitter(fields)
    flow = fields.text("flow")
    if flow is not None:
        fields.attempt("flow", lambda: entity_id(flow, "flow"))
    values = _values(fields)
    if (not fields.ok or task_id is None or schedule is None or misfire is None
            or overlap is None):
        return None
    spec = TriggerSpec(schedule=schedule, misfire_policy=misfire, overlap=overlap, jitter=jitter,
                       parameters=values, flow=flow)
    return DesiredTrigger(
        project_id=project, trigger_id=trigger_id, task_id=task_id, spec=spec, enabled=enabled,
        keep_anchor=keep_anchor, where=where, path=f"triggers.{trigger_id}",
        lines={key: Where(file, line) for key, line in mapping.key_lines.items()})

