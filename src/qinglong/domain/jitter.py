"""Bounded jitter: each occurrence runs a little after its nominal instant, never more than the
trigger's bound later, and never out of order.

A trigger's jitter is a bound ``B`` (``max_s``, 1 s to 1 h) and the part of it that varies per
occurrence, ``R`` (``random_s``, 0 to ``B``). An occurrence's offset is

    stable + random,   stable = h(project, trigger) mod (B - R + 1)          (0 .. B - R)
                       random = h(project, trigger, nominal) mod (room + 1)  (0 .. room)
                       room   = min(R, seconds to the next occurrence - 1)

in whole seconds, where ``h`` is the first 8 bytes of a SHA-256 (big-endian). So:

* the stable part is a hash of the trigger's identity: it does not wander from one
  occurrence, revision, process or replica to the next (spreading many ``@daily`` triggers
  over the bound, like Jenkins' ``H``);
* the random part is a hash of the identity and the nominal instant: every replica, the
  commit-time re-verification and the audit compute the same value, with no state;
* the offset never exceeds ``B`` (stable <= B - R, random <= R);
* the jittered instants keep the order of the nominal ones: an occurrence's offset is at
  most the stable part plus one second less than the gap to the next occurrence, which starts
  from the same stable part, so ``jittered(n) < jittered(next)``. A one-shot instant (no next
  occurrence) may use all of ``R``.

An occurrence keeps its nominal instant as its identity (its Run's ``scheduled_for``, the
idempotency key, backfill, the ledger's rows); the jittered instant is when it becomes due:
the scheduler admits it from then on and judges its lateness (the misfire grace) against it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from qinglong.domain.interval import format_every
from qinglong.domain.occurrences import OccurrenceSource
from qinglong.errors import InvalidInput, InvalidSchedule

MAX_JITTER_S = 3_600
HASH_PREFIX = "qinglong.jitter.v1"


def _hash(*parts: str) -> int:
    text = "\x00".join((HASH_PREFIX, *parts)).encode("utf-8")
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")


@dataclass(frozen=True, slots=True)
class Jitter:
    """Up to ``max_s`` seconds after each nominal instant, ``random_s`` of them per occurrence."""

    max_s: int
    random_s: int = 0

    def __post_init__(self) -> None:
        for name, value in (("jitter", self.max_s), ("jitter-random", self.random_s)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInput(name, "must be a whole number of seconds")
        if not 1 <= self.max_s <= MAX_JITTER_S:
            raise InvalidInput("jitter", f"must be from 1s to {format_every(MAX_JITTER_S)} (0s: "
                                         "no jitter)")
        if not 0 <= self.random_s <= self.max_s:
            raise InvalidInput("jitter-random", "must be from 0s to the jitter "
                                                f"({format_every(self.max_s)})")

    @classmethod
    def of(cls, max_s: int, random_s: int = 0) -> Jitter | None:
        """None for no jitter (a bound of 0)."""
        if max_s == 0 and random_s == 0:
            return None
        if max_s == 0:
            raise InvalidInput("jitter-random", "needs a jitter (--jitter) to be a part of")
        return cls(max_s, random_s)

    def to_json(self) -> dict[str, object]:
        return {"maxSeconds": self.max_s, "randomSeconds": self.random_s}

    @classmethod
    def from_json(cls, value: object) -> Jitter:
        if not isinstance(value, Mapping) or set(value) != {"maxSeconds", "randomSeconds"}:
            raise InvalidSchedule("jitter", "must have exactly maxSeconds and randomSeconds")
        return cls(value["maxSeconds"], value["randomSeconds"])

    def describe(self) -> str:
        part = f", {format_every(self.random_s)} of it per occurrence" if self.random_s else ""
        return f"jitter up to {format_every(self.max_s)}{part}"

    def stable_s(self, project_id: str, trigger_id: str) -> int:
        return _hash(project_id, trigger_id) % (self.max_s - self.random_s + 1)

    def offset_s(self, project_id: str, trigger_id: str, nominal_ms: int,
                 next_ms: int | None) -> int:
        """The whole seconds ``nominal_ms`` is delayed by (see the module docs)."""
        room = self.random_s
        if next_ms is not None:
            room = min(room, (next_ms - nominal_ms) // 1000 - 1)
        random = _hash(project_id, trigger_id, str(nominal_ms)) % (max(room, 0) + 1)
        return self.stable_s(project_id, trigger_id) + random

    def delay(self, occurrences: OccurrenceSource, project_id: str, trigger_id: str) -> Delay:
        """When each occurrence of one trigger's schedule becomes due."""

        def due(nominal_ms: int) -> int:
            following = _next(occurrences, nominal_ms) if self.random_s else None
            return nominal_ms + 1000 * self.offset_s(project_id, trigger_id, nominal_ms,
                                                     following)

        return Delay(due=due, bound_ms=self.max_s * 1000)


@dataclass(frozen=True, slots=True)
class Delay:
    """``due(nominal)``: the jittered instant of an occurrence, at most ``bound_ms`` after it
    and in the order of the nominal instants (what the scheduling decision needs)."""

    due: Callable[[int], int]
    bound_ms: int


def _next(occurrences: OccurrenceSource, after_ms: int) -> int | None:
    try:
        return occurrences.next_after(after_ms)
    except InvalidSchedule:  # a cron expression past what can be computed
        return None
