"""What one scheduler cycle did, and the per-cycle tally both coordinators share."""

from __future__ import annotations

from dataclasses import dataclass, field

from qinglong.domain.decision import Disposition
from qinglong.storage.ports import CommitOutcome, CommitResult


@dataclass(frozen=True, slots=True, kw_only=True)
class CycleReport:
    claimed: int = 0
    initialized: int = 0
    admitted: int = 0
    skipped: int = 0
    raced: int = 0
    errors: int = 0
    saturated: bool = False
    next_due_in_ms: int | None = None  # wake-up hint; None when nothing is scheduled
    first_observed_at_ms: int | None = None
    last_observed_at_ms: int | None = None


@dataclass(slots=True)
class Tally:
    claimed: int = 0
    initialized: int = 0
    admitted: int = 0
    skipped: int = 0
    raced: int = 0
    errors: int = 0
    observed: list[int] = field(default_factory=list)

    def record(self, result: CommitResult) -> None:
        if result.outcome is CommitOutcome.RACED:
            self.raced += 1
        elif result.outcome is CommitOutcome.ADMITTED:
            self.admitted += 1
        elif result.disposition is Disposition.INITIALIZE:
            self.initialized += 1
        else:
            self.skipped += 1

    def report(self, *, budget: int, next_due_in_ms: int | None) -> CycleReport:
        return CycleReport(
            claimed=self.claimed,
            initialized=self.initialized,
            admitted=self.admitted,
            skipped=self.skipped,
            raced=self.raced,
            errors=self.errors,
            saturated=self.claimed >= budget,
            next_due_in_ms=next_due_in_ms,
            first_observed_at_ms=self.observed[0] if self.observed else None,
            last_observed_at_ms=self.observed[-1] if self.observed else None,
        )
