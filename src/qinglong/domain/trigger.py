"""Triggers: the `qinglong/cron@v1` spec and immutable trigger revisions.

Every trigger revision pins one task revision by number and content digest; the
runtime never resolves "the current task".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from qinglong.domain.canonical import canonical_json, content_digest, verify_digest
from qinglong.domain.cron import CronSchedule
from qinglong.domain.identifiers import entity_id, project_id
from qinglong.domain.task import check_revision
from qinglong.errors import InvalidInput, RecordCorrupt

TRIGGER_SPEC_SCHEMA = "qinglong/cron@v1"
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


@dataclass(frozen=True, slots=True, kw_only=True)
class CronTriggerSpec:
    """The `qinglong/cron@v1` trigger spec."""

    schedule: CronSchedule
    misfire_policy: MisfirePolicy
    overlap: Overlap = Overlap()

    @classmethod
    def parse(cls, *, expression: str, timezone: str, misfire: str,
              overlap: Overlap | None = None) -> CronTriggerSpec:
        return cls(
            schedule=CronSchedule.parse(expression, timezone),
            misfire_policy=MisfirePolicy.parse(misfire),
            overlap=overlap or Overlap(),
        )

    @property
    def expression(self) -> str:
        return self.schedule.expression

    @property
    def timezone(self) -> str:
        return self.schedule.timezone

    def envelope(self) -> dict[str, object]:
        config: dict[str, object] = {
            "expression": self.schedule.expression,
            "timezone": self.schedule.timezone,
            "misfirePolicy": self.misfire_policy.value,
        }
        if self.overlap.exclusive:  # left out when allowed, so older revisions keep their form
            config["overlap"] = self.overlap.to_json()
        return {"schema": TRIGGER_SPEC_SCHEMA, "config": config}

    def json_text(self) -> str:
        return canonical_json(self.envelope())


def parse_trigger_envelope(envelope: object, *, stored: bool = False) -> CronTriggerSpec:
    """A spec from its JSON envelope; ``stored`` for one read back from a digest-verified
    revision (see CronSchedule.stored)."""
    if not isinstance(envelope, Mapping) or set(envelope) != {"schema", "config"}:
        raise InvalidInput("spec", "must be an object with exactly 'schema' and 'config'")
    if envelope["schema"] != TRIGGER_SPEC_SCHEMA:
        raise InvalidInput("spec.schema", f"only {TRIGGER_SPEC_SCHEMA} is supported")
    config = envelope["config"]
    required = {"expression", "timezone", "misfirePolicy"}
    if not isinstance(config, Mapping) or not required <= set(config) <= required | {"overlap"}:
        raise InvalidInput("spec.config",
                           "must have exactly expression, timezone, misfirePolicy (and overlap)")
    overlap = Overlap.parse(config["overlap"]) if "overlap" in config else Overlap()
    if stored:
        return CronTriggerSpec(
            schedule=CronSchedule.stored(config["expression"], config["timezone"]),
            misfire_policy=MisfirePolicy.parse(config["misfirePolicy"]),
            overlap=overlap,
        )
    spec = CronTriggerSpec.parse(
        expression=config["expression"],
        timezone=config["timezone"],
        misfire=config["misfirePolicy"],
        overlap=overlap,
    )
    if spec.expression != config["expression"] or spec.timezone != config["timezone"]:
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
    spec: CronTriggerSpec
    enabled: bool
    content_digest: str
    created_at_ms: int

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


def trigger_content(
    *,
    project_id: str,
    trigger_id: str,
    revision: int,
    task_id: str,
    task_revision: int,
    task_content_digest: str,
    spec: CronTriggerSpec,
    enabled: bool,
) -> dict[str, object]:
    return {
        "projectId": project_id,
        "triggerId": trigger_id,
        "revision": revision,
        "taskId": task_id,
        "taskRevision": task_revision,
        "taskContentDigest": task_content_digest,
        "spec": spec.envelope(),
        "enabled": enabled,
    }


def new_trigger_revision(
    *,
    project: str,
    trigger: str,
    revision: int,
    task: str,
    task_revision: int,
    task_content_digest: str,
    spec: CronTriggerSpec,
    enabled: bool,
    created_at_ms: int,
) -> TriggerRevision:
    project_id(project)
    entity_id(trigger, "trigger")
    entity_id(task, "task")
    check_revision(revision, "revision")
    check_revision(task_revision, "task revision")
    digest = content_digest(
        TRIGGER_DIGEST_PREFIX,
        trigger_content(
            project_id=project,
            trigger_id=trigger,
            revision=revision,
            task_id=task,
            task_revision=task_revision,
            task_content_digest=task_content_digest,
            spec=spec,
            enabled=enabled,
        ),
    )
    return TriggerRevision(
        project_id=project,
        trigger_id=trigger,
        revision=revision,
        task_id=task,
        task_revision=task_revision,
        task_content_digest=task_content_digest,
        spec=spec,
        enabled=enabled,
        content_digest=digest,
        created_at_ms=created_at_ms,
    )


def trigger_revision_from_row(row: Mapping[str, object], spec_envelope: object) -> TriggerRevision:
    """Rebuild a stored trigger revision and verify its digest (RecordCorrupt if it fails)."""
    what = f"trigger revision {row['project_id']}/{row['trigger_id']}@{row['revision']}"
    try:
        record = new_trigger_revision(
            project=str(row["project_id"]),
            trigger=str(row["trigger_id"]),
            revision=int(row["revision"]),  # type: ignore[call-overload]
            task=str(row["task_id"]),
            task_revision=int(row["task_revision"]),  # type: ignore[call-overload]
            task_content_digest=str(row["task_content_digest"]),
            spec=parse_trigger_envelope(spec_envelope, stored=True),
            enabled=bool(row["enabled"]),
            created_at_ms=int(row["created_at_ms"]),  # type: ignore[call-overload]
        )
    except InvalidInput as exc:
        raise RecordCorrupt(f"{what} is malformed ({exc.message})") from exc
    except (TypeError, ValueError, KeyError) as exc:
        raise RecordCorrupt(f"{what} is malformed") from exc
    verify_digest(str(row["content_digest"]), record.content_digest, what)
    return record
