"""What one scheduler cycle did, its per-cycle tally and the running totals."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

from qinglong.diagnostics import Diagnostic
from qinglong.domain.decision import Disposition
from qinglong.errors import RecordCorrupt
from qinglong.storage.admission.params import CommitOutcome, CommitResult, CorruptScheduleRow


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


COUNTS = ("claimed", "initialized", "admitted", "skipped", "raced", "errors")  # CycleReport's


@dataclass(slots=True)
class Tally:
    """The cycle in progress: its ``counts`` (under the COUNTS names), the claims' observation
    times and why claims raced."""

    counts: Counter[str] = field(default_factory=Counter)
    observed: list[int] = field(default_factory=list)
    raced_reasons: Counter[str] = field(default_factory=Counter)

    @property
    def claimed(self) -> int:
        return self.counts["claimed"]

    def record(self, result: CommitResult) -> None:
        if result.outcome is CommitOutcome.RACED:
            self.counts["raced"] += 1
            self.raced_reasons[result.reason or "unknown"] += 1
        elif result.outcome is CommitOutcome.ADMITTED:
            self.counts["admitted"] += 1
        elif result.disposition is Disposition.INITIALIZE:
            self.counts["initialized"] += 1
        else:
            self.counts["skipped"] += 1

    def report(self, *, budget: int, next_due_in_ms: int | None) -> CycleReport:
        return CycleReport(
            **self.counts,
            saturated=self.claimed >= budget,
            next_due_in_ms=next_due_in_ms,
            first_observed_at_ms=self.observed[0] if self.observed else None,
            last_observed_at_ms=self.observed[-1] if self.observed else None,
        )


class Stats:
    """Running totals of what a coordinator did, under the names every surface shows
    (``/status``, logs): cycles, claimed, admitted, initialized, skipped (misfires), raced
    (and ``raced:<reason>``), errors. Safe to read from another thread."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, report: CycleReport, raced_reasons: Counter[str]) -> None:
        with self._lock:
            self._counts["cycles"] += 1
            for name in COUNTS:
                self._counts[name] += getattr(report, name)
            for reason, n in raced_reasons.items():
                self._counts[f"raced:{reason}"] += n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(sorted(self._counts.items()))


def corrupt_row_diagnostic(row: CorruptScheduleRow) -> Diagnostic:
    """A due row whose stored facts failed verification: reported, never decided."""
    return Diagnostic(
        source="scheduler",
        code=RecordCorrupt.code,
        message=f"{row.project_id}/{row.trigger_id}: {row.problem}",
    )
