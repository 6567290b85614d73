"""Schedule rows as the scheduler sees them: candidates, cluster claims, and deciding one."""

from __future__ import annotations

from dataclasses import dataclass

from qinglong.domain.decision import Decision, Pause, decide
from qinglong.domain.trigger import TriggerSpec
from qinglong.errors import InvalidConfig

# Bounds of a scheduler cycle and of a cluster claim, declared once for every surface.
MIN_BUDGET = 1
MAX_BUDGET = 256
MIN_CLAIM_LEASE_MS = 1_000
MAX_CLAIM_LEASE_MS = 60_000


def _bounded(value: int, low: int, high: int, field: str, unit: str = "") -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidConfig(field, f"must be between {low} and {high}{unit}")
    return value


def check_budget(budget: int, field: str = "budget") -> int:
    """Decisions (or claims) per scheduler cycle."""
    return _bounded(budget, MIN_BUDGET, MAX_BUDGET, field)


def check_claim_lease(lease_ms: int, field: str = "lease") -> int:
    """How long a cluster claim on a schedule row lasts."""
    return _bounded(lease_ms, MIN_CLAIM_LEASE_MS, MAX_CLAIM_LEASE_MS, field, " ms")


DEFAULT_CLAIM_LEASE_MS = 10_000  # a third of the default grace (docs/guarantees.md)


def lease_grace_risk(lease_ms: int, grace_ms: int) -> str | None:
    """Why a claim lease that is not shorter than the misfire grace is unsafe (else None):
    when a replica dies holding claims, another takes them over only after the lease, and
    an occurrence that waited longer than the grace by then is decided as misfired."""
    if lease_ms < grace_ms:
        return None
    return (f"lease {lease_ms} ms >= grace {grace_ms} ms: occurrences held by a replica that "
            "dies may misfire before another replica takes them over")


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
    spec: TriggerSpec
    state_version: int
    next_fire_at_ms: int | None
    pause: Pause | None = None  # the trigger's latest pause (in effect, or ended)

    def decide(self, *, observed_at_ms: int, grace_ms: int) -> Decision:
        return decide(
            cursor_ms=self.next_fire_at_ms,
            published_at_ms=self.trigger_published_at_ms,
            observed_at_ms=observed_at_ms,
            grace_ms=grace_ms,
            policy=self.spec.misfire_policy,
            occurrences=self.spec.schedule,
            pause=self.pause,
            delay=self.spec.delay(self.project_id, self.trigger_id),
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
