"""Daylight saving time for cron triggers (``docs/reference/cron.md``): the policy a
wall-clock expression follows at DST transitions (`DstPolicy`: a gap ``shift`` or ``skip``, an
overlap ``first``, ``second`` or ``both``), what DST did to one occurrence (`DstNote`), and
the mapping of a local wall time to the instants it fires at under a policy
(`resolve_wall_time`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from qinglong.domain.cron_fields import is_wall_clock
from qinglong.domain.zone_offsets import first_differing, offset_at
from qinglong.errors import InvalidSchedule


class DstNote(StrEnum):
    """What daylight saving time did to one occurrence."""

    NONE = ""
    GAP_SHIFTED = "gap-shifted"  # wall time did not exist; fired at the end of the gap
    OVERLAP_FIRST = "overlap-first"  # wall time repeated; this is its first instant
    OVERLAP_SECOND = "overlap-second"  # wall time repeated; this is its second instant


class DstGap(StrEnum):
    """A wall-clock time that a spring-forward gap makes not exist."""

    SHIFT = "shift"  # fire at the first instant after the gap
    SKIP = "skip"  # do not fire that day


class DstOverlap(StrEnum):
    """A wall-clock time that a fall-back overlap makes happen twice."""

    FIRST = "first"  # fire once, at the first (earlier) instant
    SECOND = "second"  # fire once, at the second (later) instant
    BOTH = "both"  # fire at both instants


@dataclass(frozen=True, slots=True)
class DstPolicy:
    """What a wall-clock cron expression does at DST transitions (``docs/reference/cron.md``).

    Stored in a cron spec's config as ``dst`` only when it is not the default, so revisions
    published before policies existed keep their exact envelope and digest."""

    gap: DstGap = DstGap.SHIFT
    overlap: DstOverlap = DstOverlap.FIRST

    @classmethod
    def parse(cls, gap: str | None = None, overlap: str | None = None,
              base: DstPolicy | None = None) -> DstPolicy:
        """Named parts replace those of ``base`` (default: the default policy)."""
        base = base or cls()
        try:
            return cls(gap=DstGap(gap) if gap is not None else base.gap,
                       overlap=DstOverlap(overlap) if overlap is not None else base.overlap)
        except ValueError:
            if gap is not None and gap not in {g.value for g in DstGap}:
                raise InvalidSchedule("dst-gap", "must be shift or skip") from None
            raise InvalidSchedule("dst-overlap", "must be first, second or both") from None

    @property
    def default(self) -> bool:
        return self == DstPolicy()

    def to_json(self) -> dict[str, object]:
        return {"gap": self.gap.value, "overlap": self.overlap.value}

    @classmethod
    def from_json(cls, value: object) -> DstPolicy:
        """The ``dst`` of a stored config: exactly ``gap`` and ``overlap``, not the default."""
        if not isinstance(value, dict) or set(value) != {"gap", "overlap"}:
            raise InvalidSchedule("dst", "must have exactly gap and overlap")
        gap, overlap = value["gap"], value["overlap"]
        if not isinstance(gap, str) or not isinstance(overlap, str):
            raise InvalidSchedule("dst", "gap and overlap must be strings")
        policy = cls.parse(gap, overlap)
        if policy.default:
            raise InvalidSchedule("dst", "is not in canonical form (the default is left out)")
        return policy

    def describe(self) -> str:
        return f"gap {self.gap.value}, overlap {self.overlap.value}"


def check_dst_applies(expression: str, dst: DstPolicy) -> None:
    """A DST policy other than the default needs a wall-clock expression."""
    if dst.default or is_wall_clock(expression):
        return
    field = "dst-gap" if dst.gap is not DstGap.SHIFT else "dst-overlap"
    raise InvalidSchedule(field, f"applies only to wall-clock expressions (fixed second, minute "
                                 f"and hour fields); {expression!r} follows real elapsed time "
                                 "across DST changes (use --dst-gap shift --dst-overlap first)")


def is_ambiguous(wall: datetime, tz: object) -> bool:
    first = wall.replace(tzinfo=tz, fold=0)  # type: ignore[arg-type]
    second = wall.replace(tzinfo=tz, fold=1)  # type: ignore[arg-type]
    return first.utcoffset() != second.utcoffset() and not is_imaginary(wall, tz)


def is_imaginary(wall: datetime, tz: object) -> bool:
    aware = wall.replace(tzinfo=tz, fold=0)  # type: ignore[arg-type]
    return aware.astimezone(UTC).astimezone(tz).replace(tzinfo=None) != wall  # type: ignore[arg-type]


def gap_end(wall: datetime, tz: object) -> int:
    """For a wall time in a spring-forward gap: the first instant after the gap. fold=1 applies
    the later offset (an earlier instant), fold=0 the earlier offset (a later instant); the
    gap ends where the offset changes in between."""
    low = int(wall.replace(tzinfo=tz, fold=1).timestamp())  # type: ignore[arg-type]
    high = int(wall.replace(tzinfo=tz, fold=0).timestamp())  # type: ignore[arg-type]
    return first_differing(low, high, tz, offset_at(low, tz))


def resolve_wall_time(wall: datetime, tz: object, dst: DstPolicy) -> list[tuple[int, DstNote]]:
    """The epoch seconds a local wall time fires at under the wall-clock rule and ``dst``:
    none (a gap skipped), one, or two (both instants of an overlap), ascending."""
    if is_imaginary(wall, tz):
        return [] if dst.gap is DstGap.SKIP else [(gap_end(wall, tz), DstNote.GAP_SHIFTED)]
    first = int(wall.replace(tzinfo=tz, fold=0).timestamp())  # type: ignore[arg-type]
    if not is_ambiguous(wall, tz):
        return [(first, DstNote.NONE)]
    second = int(wall.replace(tzinfo=tz, fold=1).timestamp())  # type: ignore[arg-type]
    if dst.overlap is DstOverlap.FIRST:
        return [(first, DstNote.OVERLAP_FIRST)]
    if dst.overlap is DstOverlap.SECOND:
        return [(second, DstNote.OVERLAP_SECOND)]
    return [(first, DstNote.OVERLAP_FIRST), (second, DstNote.OVERLAP_SECOND)]


