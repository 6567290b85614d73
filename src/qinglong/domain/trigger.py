"""Triggers: the `qinglong/cron@v1`, `qinglong/interval@v1` and `qinglong/once@v1` specs and
immutable trigger revisions.

Every trigger revision pins one task revision by number and content digest; the
runtime never resolves "the current task".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from qinglong.domain.canonical import canonical_json, rebuild_verified, sealed
from qinglong.domain.cron import CronSchedule, DstPolicy
from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.interval import IntervalSchedule
from qinglong.domain.jitter import Delay, Jitter
from qinglong.domain.once import OnceSchedule
from qinglong.domain.parameters import Value, trigger_values
from qinglong.domain.task import check_revision
from qinglong.errors import InvalidInput, InvalidSchedule

TRIGGER_SPEC_SCHEMA = "qinglong/cron@v1"
INTERVAL_SPEC_SCHEMA = "qinglong/interval@v1"
ONCE_SPEC_SCHEMA = "qinglong/once@v1"
TRIGGER_DIGEST_PREFIX = "qinglong.trigger-definition.v1"


class MisfirePolicy(StrEnum):
    SKIP = "skip"
    FIRE_ONCE = "fire_once"

    @classmethod
    def parse(cls, value: str) -> MisfirePolicy:
        try:
            return cls(value)
        except ValueError:
            raise InvalidInput("misfire", "must be 'skip' or 'fire_once'") from None


class OverlapPolicy(StrEnum):
    """What happens to a Run whose trigger's previous Run is still in progress when it comes
    up for dispatch (every occurrence is admitted either way; this decides its fate)."""

    ALLOW = "allow"  # run them side by side
    SKIP = "skip"  # cancel the new Run (reason policy)
    QUEUE = "queue"  # the new Run waits its turn, up to a queue limit; beyond it, cancelled
    CANCEL_PREVIOUS = "cancel_previous"  # ask the running one to stop; the new one waits

    @classmethod
    def parse(cls, value: str) -> OverlapPolicy:
        try:
            return cls(value)
        except ValueError:
            raise InvalidInput("overlap", "must be one of " + ", ".join(p.value for p in cls)) \
                from None


MAX_QUEUE_LIMIT = 1000
DEFAULT_QUEUE_LIMIT = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Overlap:
    policy: OverlapPolicy = OverlapPolicy.ALLOW
    queue_limit: int = DEFAULT_QUEUE_LIMIT  # waiting Runs allowed by the queue policy

    def __post_init__(self) -> None:
        if (not isinstance(self.queue_limit, int) or isinstance(self.queue_limit, bool)
                or not 0 <= self.queue_limit <= MAX_QUEUE_LIMIT):
            raise InvalidInput("overlap-queue-limit", f"must be between 0 and {MAX_QUEUE_LIMIT}")
        if self.policy is not OverlapPolicy.QUEUE and self.queue_limit != DEFAULT_QUEUE_LIMIT:
            raise InvalidInput("overlap-queue-limit", "applies only to --overlap queue")

    @property
    def exclusive(self) -> bool:
        return self.policy is not OverlapPolicy.ALLOW

    def to_json(self) -> dict[str, object]:
        return {"policy": self.policy.value, "queueLimit": self.queue_limit}

    @classmethod
    def parse(cls, value: object) -> Overlap:
        if not isinstance(value, Mapping) or set(value) != {"policy", "queueLimit"}:
            raise InvalidInput("overlap", "must have exactly policy and queueLimit")
        overlap = cls(policy=OverlapPolicy.parse(value["policy"]), queue_limit=value["queueLimit"])
        if not overlap.exclusive:
            raise InvalidInput("overlap", "is not in canonical form (allow is left out)")
        return overlap


ScheduleKind = CronSchedule | IntervalSchedule | OnceSchedule

# The spec schema of each kind of schedule (the envelope's "schema").
SCHEMAS: dict[str, str] = {
    "cron": TRIGGER_SPEC_SCHEMA,
    "interval": INTERVAL_SPEC_SCHEMA,
    "once": ONCE_SPEC_SCHEMA,
}
_KINDS = {schema: kind for kind, schema in SCHEMAS.items()}


def schedule_kind(schedule: ScheduleKind) -> str:
    if isinstance(schedule, IntervalSchedule):
        return "interval"
    if isinstance(schedule, OnceSchedule):
        return "once"
    return "cron"


def text_kind(expression: str) -> str:
    """Which kind of schedule a text states: ``every ...``, ``at ...``, or a cron expression."""
    words = expression.split(None, 1) if isinstance(expression, str) else []
    first = words[0] if words else ""
    return {"every": "interval", "at": "once"}.get(first, "cron")


def parse_schedule(expression: str, timezone: str, *, default_anchor_ms: int | None = None,
                   dst: DstPolicy | None = None) -> ScheduleKind:
    """A schedule as a publish gives it: a cron expression (with its DST policy),
    ``every DURATION [from TIME]`` (without ``from``, anchored at ``default_anchor_ms``) or
    ``at TIME``."""
    kind = text_kind(expression)
    if kind != "cron" and dst is not None and not dst.default:
        raise InvalidSchedule("dst-gap" if dst.gap.value != "shift" else "dst-overlap",
                              "a DST policy applies only to cron triggers (an interval or "
                              "one-shot trigger follows real elapsed time)")
    if kind == "interval":
        return IntervalSchedule.from_text(expression, timezone,
                                          default_anchor_ms=default_anchor_ms)
    if kind == "once":
        return OnceSchedule.from_text(expression, timezone)
    return CronSchedule.parse(expression, timezone, dst)


def stored_schedule(expression: str, timezone: str, kind: str | None = None,
                    dst: DstPolicy | None = None) -> ScheduleKind:
    """A schedule read back from a digest-verified revision (its canonical text), of ``kind``
    (default: the kind the text states)."""
    kind = kind or text_kind(expression)
    if kind == "interval":
        return IntervalSchedule.stored(expression, timezone)
    if kind == "once":
        return OnceSchedule.stored(expression, timezone)
    return CronSchedule.stored(expression, timezone, dst)


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerSpec:
    """A trigger spec: when it fires (a cron, interval or one-shot schedule), what a late
    scheduler does (misfire) and what a Run that comes while another is active does (overlap).

    The envelope is ``{"schema": "qinglong/<kind>@v1", "config": {...}}`` with the schedule's
    canonical text as ``expression``; a cron spec keeps exactly the form (and so the digest)
    it always had."""

    schedule: ScheduleKind
    misfire_policy: MisfirePolicy
    overlap: Overlap = Overlap()
    jitter: Jitter | None = None  # none: every occurrence is due at its nominal instant
    # values the trigger gives its Runs' parameters, by name (the others: the defaults)
    parameters: tuple[tuple[str, Value], ...] = ()
    flow: str | None = None  # the flow each occurrence starts (None: a Run of the task)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", trigger_values(dict(self.parameters)))
        if self.flow is not None:
            entity_id(self.flow, "flow")

    @classmethod
    def parse(cls, *, expression: str, timezone: str, misfire: str,
              overlap: Overlap | None = None, default_anchor_ms: int | None = None,
              dst: DstPolicy | None = None, jitter: Jitter | None = None,
              parameters: Mapping[str, Value] | None = None,
              flow: str | None = None) -> TriggerSpec:
        return cls(
            schedule=parse_schedule(expression, timezone, default_anchor_ms=default_anchor_ms,
                                    dst=dst),
            misfire_policy=MisfirePolicy.parse(misfire),
            overlap=overlap or Overlap(),
            jitter=jitter,
            parameters=tuple((parameters or {}).items()),
            flow=flow,
        )

    @property
    def values(self) -> dict[str, Value]:
        """The parameter values the trigger gives, by name."""
        return dict(self.parameters)

    @property
    def kind(self) -> str:
        return schedule_kind(self.schedule)

    @property
    def schema(self) -> str:
        return SCHEMAS[self.kind]

    @property
    def expression(self) -> str:
        """The schedule as text: the cron expression, ``every ... from ...`` or ``at ...``."""
        return self.schedule.expression

    @property
    def timezone(self) -> str:
        return self.schedule.timezone

    @property
    def cron(self) -> CronSchedule | None:
        """The schedule of a cron trigger (None for the other kinds)."""
        return self.schedule if isinstance(self.schedule, CronSchedule) else None

    @property
    def cron_expression(self) -> str | None:
        return None if self.cron is None else self.cron.expression

    @property
    def dst(self) -> DstPolicy | None:
        """The DST policy of a cron trigger (None for the other kinds)."""
        return None if self.cron is None else self.cron.dst

    def envelope(self) -> dict[str, object]:
        config: dict[str, object] = {
            "expression": self.schedule.expression,
            "timezone": self.schedule.timezone,
            "misfirePolicy": self.misfire_policy.value,
        }
        if self.overlap.exclusive:  # left out when allowed, so older revisions keep their form
            config["overlap"] = self.overlap.to_json()
        if self.dst is not None and not self.dst.default:  # likewise
            config["dst"] = self.dst.to_json()
        if self.jitter is not None:  # likewise
            config["jitter"] = self.jitter.to_json()
        if self.parameters:  # likewise
            config["parameters"] = dict(self.parameters)
        if self.flow is not None:  # likewise
            config["flow"] = self.flow
        return {"schema": self.schema, "config": config}

    def delay(self, project_id: str, trigger_id: str) -> Delay | None:
        """When the occurrences of this spec become due for one trigger (None: at once)."""
        if self.jitter is None:
            return None
        return self.jitter.delay(self.schedule, project_id, trigger_id)

    def json_text(self) -> str:
        return canonical_json(self.envelope())


CronTriggerSpec = TriggerSpec  # the name from when every trigger was a cron trigger



def parse_trigger_envelope(envelope: object, *, stored: bool = False) -> TriggerSpec:
    """A spec from its JSON envelope; ``stored`` for one read back from a digest-verified
    revision (see CronSchedule.stored)."""
    if not isinstance(envelope, Mapping) or set(envelope) != {"schema", "config"}:
        raise InvalidInput("spec", "must be an object with exactly 'schema' and 'config'")
    kind = _KINDS.get(envelope["schema"]) if isinstance(envelope["schema"], str) else None
    if kind is None:
        raise InvalidInput("spec.schema", "must be one of " + ", ".join(SCHEMAS.values()))
    config = envelope["config"]
    required = {"expression", "timezone", "misfirePolicy"}
    optional = {"overlap", "jitter", "parameters", "flow"} | ({"dst"} if kind == "cron" else set())
    if not isinstance(config, Mapping) or not required <= set(config) <= required | optional:
        raise InvalidInput("spec.config", "must have exactly expression, timezone, "
                                          "misfirePolicy (and " + ", ".join(sorted(optional)) + ")")
    overlap = Overlap.parse(config["overlap"]) if "overlap" in config else Overlap()
    dst = None
    if "dst" in config:
        if not isinstance(config["dst"], Mapping):
            raise InvalidInput("spec.config", "dst must be an object")
        dst = DstPolicy.from_json(dict(config["dst"]))
    jitter = Jitter.from_json(config["jitter"]) if "jitter" in config else None
    values = trigger_values(config["parameters"], "spec.config.parameters") \
        if "parameters" in config else ()
    if "parameters" in config and not values:
        raise InvalidInput("spec.config", "is not in canonical form (no values: left out)")
    flow = config.get("flow")
    if flow is not None and not isinstance(flow, str):
        raise InvalidInput("spec.config", "flow must be a flow id")
    expression, timezone = config["expression"], config["timezone"]
    if not isinstance(expression, str) or not isinstance(timezone, str):
        raise InvalidInput("spec.config", "expression and timezone must be strings")
    if text_kind(expression) != kind:
        raise InvalidInput("spec.config", f"the expression is not of kind {kind!r}")
    if stored:
        return TriggerSpec(
            schedule=stored_schedule(expression, timezone, kind, dst),
            misfire_policy=MisfirePolicy.parse(config["misfirePolicy"]),
            overlap=overlap,
            jitter=jitter,
            parameters=values,
            flow=flow,
        )
    spec = TriggerSpec.parse(
        expression=expression,
        timezone=timezone,
        misfire=config["misfirePolicy"],
        overlap=overlap,
        dst=dst,
        jitter=jitter,
        parameters=dict(values),
        flow=flow,
    )
    if spec.expression != expression or spec.timezone != timezone:
        raise InvalidInput("spec.config", "is not in canonical form")
    return spec


@dataclass(frozen=True, slots=True, kw_only=True)
class TriggerRevision:
    """One immutable revision of a trigger, pinned to one task revision."""

    project_id: str
    trigger_id: str
    revision: int
    task_id: str
    task_revision: int
    task_content_digest: str
    spec: TriggerSpec
    enabled: bool
    content_digest: str
    created_at_ms: int

    def content(self) -> dict[str, object]:
        return {
            "projectId": self.project_id,
            "triggerId": self.trigger_id,
            "revision": self.revision,
            "taskId": self.task_id,
            "taskRevision": self.task_revision,
            "taskContentDigest": self.task_content_digest,
            "spec": self.spec.envelope(),
            "enabled": self.enabled,
        }

    def same_definition(self, other: TriggerRevision) -> bool:
        return (
            self.task_id,
            self.task_revision,
            self.task_content_digest,
            self.spec,
            self.enabled,
        ) == (
            other.task_id,
            other.task_revision,
            other.task_content_digest,
            other.spec,
            other.enabled,
        )


def new_trigger_revision(
    *,
    project: str,
    trigger: str,
    revision: int,
    task: str,
    task_revision: int,
    task_content_digest: str,
    spec: TriggerSpec,
    enabled: bool,
    created_at_ms: int,
) -> TriggerRevision:
    project_id(project)
    entity_id(trigger, "trigger")
    entity_id(task, "task")
    check_revision(revision, "revision")
    check_revision(task_revision, "task revision")
    return sealed(TriggerRevision(project_id=project, trigger_id=trigger, revision=revision,
                                  task_id=task, task_revision=task_revision,
                                  task_content_digest=task_content_digest, spec=spec,
                                  enabled=enabled, content_digest="",
                                  created_at_ms=created_at_ms), TRIGGER_DIGEST_PREFIX)


def trigger_revision_from_row(row: Mapping[str, object], spec_envelope: object) -> TriggerRevision:
    """Rebuild a stored trigger revision and verify its digest (RecordCorrupt if it fails)."""
    what = f"trigger revision {row['project_id']}/{row['trigger_id']}@{row['revision']}"
    return rebuild_verified(what, row, lambda: new_trigger_revision(
        project=str(row["project_id"]),
        trigger=str(row["trigger_id"]),
        revision=int(row["revision"]),  # type: ignore[call-overload]
        task=str(row["task_id"]),
        task_revision=int(row["task_revision"]),  # type: ignore[call-overload]
        task_content_digest=str(row["task_content_digest"]),
        spec=parse_trigger_envelope(spec_envelope, stored=True),
        enabled=bool(row["enabled"]),
        created_at_ms=int(row["created_at_ms"]),  # type: ignore[call-overload]
    ))
