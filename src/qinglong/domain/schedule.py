"""Schedule rows as the scheduler sees them: candidates, cluster claims, and deciding one."""

from __future__ import annotations

from dataclasses import dataclass

from qinglong.domain.decision import Decision, decide
from qinglong.domain.trigger import CronTriggerSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleCandidate:
    """A due (or uninitialised) schedule row joined to the facts its decision uses."""

    project_id: str
    trigger_id: str
    trigger_revision: int
    trigger_content_digest: str
    trigger_published_at_ms: int
    task_id: str
    task_revision: int
    task_content_digest: str
    spec: CronTriggerSpec
    state_version: int
    next_fire_at_ms: int | None

    def decide(self, *, observed_at_ms: int, grace_ms: int) -> Decision:
        return decide(
            cursor_ms=self.next_fire_at_ms,
            published_at_ms=self.trigger_published_at_ms,
            observed_at_ms=observed_at_ms,
            grace_ms=grace_ms,
            policy=self.spec.misfire_policy,
            occurrences=self.spec.schedule,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaimFence:
    """The four-part lease fence of a cluster claim, plus its database acquisition time."""

    owner: str
    token: str
    version: int
    acquired_at_ms: int
    expires_at_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ScheduleClaim:
    """A claimed schedule row: the candidate plus the fence that must hold at commit."""

    candidate: ScheduleCandidate
    fence: ClaimFence
    row_locator: str | None = None  # adapter-defined address of the claimed row version

    def decide(self, *, grace_ms: int) -> Decision:
        """Decide at the claim's database acquisition time -- never a node clock."""
        return self.candidate.decide(observed_at_ms=self.fence.acquired_at_ms, grace_ms=grace_ms)
