"""Per-task resource limits (issue 21, item 4): the most memory and CPU time one Attempt's
command may use, part of the task's spec and digest (docs/controls/limits.md).

The executor applies them when it starts the command, so the command and everything it
starts inherit them: memory in a memory cgroup of the command's own where the executor may
make one (execution/cgroups.py: resident memory, MEMORY_LIMIT when the kernel kills for
it), else with ``setrlimit`` through util-linux's ``prlimit`` as RLIMIT_AS (an allocation
beyond it fails, and the program decides what that does); and RLIMIT_CPU for
CPU time (SIGXCPU at the limit, SIGKILL CPU_HARD_GRACE_S later for a command that ignores
it). A command ended by SIGXCPU ends its Attempt with the reason CPU_LIMIT.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from qinglong.errors import InvalidInput

MIN_MEMORY_BYTES = 16 * 1024**2
MAX_MEMORY_BYTES = 1024**4
MIN_CPU_SECONDS = 1
MAX_CPU_SECONDS = 30 * 24 * 3600
CPU_HARD_GRACE_S = 5  # SIGKILL this long after SIGXCPU, for a command that ignores SIGXCPU

_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
SIZE_RULE = "must be a size such as 512M, 2G or 1073741824 (bytes; K, M, G, T are powers of 1024)"


def parse_size(text: str, field: str = "memory-limit") -> int:
    """Bytes from ``512M``, ``2GiB``, ``1g`` or a number of bytes."""
    found = _SIZE.match(text) if isinstance(text, str) else None
    if not found:
        raise InvalidInput(field, SIZE_RULE)
    unit = (found.group(2) or "").upper().removesuffix("B").removesuffix("I")
    return int(found.group(1)) * _UNITS[unit]


def format_size(size: int) -> str:
    """The largest unit that divides ``size`` exactly: 512 MiB, 3 GiB, 1000 bytes."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"


def _bounded(value: object, field: str, low: int, high: int, rule: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidInput(field, rule)
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceLimits:
    memory_bytes: int | None = None
    cpu_seconds: int | None = None

    def __post_init__(self) -> None:
        if self.memory_bytes is not None:
            _bounded(self.memory_bytes, "memory-limit", MIN_MEMORY_BYTES, MAX_MEMORY_BYTES,
                     f"must be between {format_size(MIN_MEMORY_BYTES)} and "
                     f"{format_size(MAX_MEMORY_BYTES)}")
        if self.cpu_seconds is not None:
            _bounded(self.cpu_seconds, "cpu-limit", MIN_CPU_SECONDS, MAX_CPU_SECONDS,
                     "must be a whole number of seconds from 1 s to 30 days")

    @property
    def empty(self) -> bool:
        return self.memory_bytes is None and self.cpu_seconds is None

    def to_json(self) -> dict[str, object]:
        found: dict[str, object] = {}
        if self.cpu_seconds is not None:
            found["cpuSeconds"] = self.cpu_seconds
        if self.memory_bytes is not None:
            found["memoryBytes"] = self.memory_bytes
        return found

    @classmethod
    def parse(cls, value: object) -> ResourceLimits:
        """Stored limits: an object with cpuSeconds and/or memoryBytes (left out when none)."""
        if not isinstance(value, Mapping) or not value or set(value) - {"cpuSeconds",
                                                                         "memoryBytes"}:
            raise InvalidInput("limits", "must be an object with cpuSeconds and/or memoryBytes "
                                         "(left out when there are none)")
        return cls(memory_bytes=value.get("memoryBytes"),
                   cpu_seconds=value.get("cpuSeconds"))

    def text(self) -> str:
        """``memory 512 MiB, CPU 600 s`` (or ``none``)."""
        parts = []
        if self.memory_bytes is not None:
            parts.append(f"memory {format_size(self.memory_bytes)}")
        if self.cpu_seconds is not None:
            parts.append(f"CPU time {self.cpu_seconds} s")
        return ", ".join(parts) or "none"

    def prlimit_args(self, *, memory: bool = True) -> list[str]:
        """The options of util-linux ``prlimit`` that set these limits (soft:hard); without
        ``memory`` when a memory cgroup holds the memory limit instead."""
        args = []
        if self.memory_bytes is not None and memory:
            args.append(f"--as={self.memory_bytes}:{self.memory_bytes}")
        if self.cpu_seconds is not None:
            args.append(f"--cpu={self.cpu_seconds}:{self.cpu_seconds + CPU_HARD_GRACE_S}")
        return args


def whole_seconds(ms: int, field: str = "cpu-limit") -> int:
    """A CPU-time limit given as a duration (milliseconds) in whole seconds."""
    if ms % 1000:
        raise InvalidInput(field, "must be a whole number of seconds (RLIMIT_CPU counts seconds)")
    return ms // 1000


def size_text(size: int) -> str:
    """A size as a file or flag gives it, exactly: 512M, 3G, 1000 (bytes)."""
    for unit, factor in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)
