"""CPU accounting from /proc: the CPU seconds of the processes a benchmark started (each with
the children it reaped, for those tracked with ``children=True`` also given on their own as
``<name>.children``), of a PostgreSQL server (postmaster and backends), of the harness and
of the machine, and the busiest other processes. Linux only."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")
CHILDREN = ".children"  # suffix of the part of a process's figure spent by children it reaped


def _proc_stat(pid: int) -> tuple[int, list[int]] | None:
    """(ppid, [utime, stime, cutime, cstime]) in clock ticks, or None if the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rindex(")") + 2:].split()  # rest[0] is field 3 (state)
    return int(rest[1]), [int(rest[i]) for i in (11, 12, 13, 14)]


def _machine_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of all CPUs since boot, from the first line of /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def context_switches(pid: int) -> int | None:
    """Context switches so far (voluntary and not) of the live threads of ``pid``, or None if
    the process is gone. A thread that ended took its count with it."""
    total, found = 0, False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for task in tasks:
        try:
            text = Path(f"/proc/{pid}/task/{task}/status").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        for line in text.splitlines():
            if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                total += int(line.split()[1])
                found = True
    return total if found else None


@dataclass
class CpuSample:
    at: float
    seconds: dict[str, float]
    others: dict[int, tuple[int, str]]  # pid -> (ticks, command) of processes we did not start
    switches: dict[str, int] = field(default_factory=dict)  # of the processes tracked apart


def _command(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return " ".join(w.decode(errors="replace") for w in words if w)[:100] or "?"


@dataclass
class CpuMeter:
    """CPU seconds consumed so far by the named processes (each with the children it reaped),
    by the whole PostgreSQL server (postmaster, its reaped children, and its live backends),
    by this harness, and by the machine as a whole (busy time over all CPUs); and, to explain
    the rest, the CPU ticks of every other live process. Without a ``postmaster`` (a
    SQLite benchmark) no PostgreSQL figure is given."""

    postmaster: int | None = None
    tracked: dict[str, int] = field(default_factory=dict)
    split: set[str] = field(default_factory=set)  # names whose reaped children are given apart
    _last: dict[str, float] = field(default_factory=dict)

    def track(self, name: str, pid: int, *, children: bool = False) -> None:
        """Count ``pid`` as ``name``; ``children``: also give the CPU of the children it
        reaped (a worker's commands) on their own, as ``<name>.children``, and count the
        context switches of its threads (``CpuSample.switches``)."""
        self.tracked[name] = pid
        if children:
            self.split.add(name)

    def sample(self) -> CpuSample:
        seconds: dict[str, float] = {}
        switches: dict[str, int] = {}
        for name in self.split:
            count = context_switches(self.tracked[name])
            if count is not None:
                switches[name] = count
        for name, pid in self.tracked.items():
            stat = _proc_stat(pid)
            if stat is not None:
                self._last[name] = sum(stat[1]) / TICK
                self._last[name + CHILDREN] = (stat[1][2] + stat[1][3]) / TICK
            # an exited process keeps its last values
            seconds[name] = self._last.get(name, 0.0)
            if name in self.split:
                seconds[name + CHILDREN] = self._last.get(name + CHILDREN, 0.0)
        ours = {os.getpid(), *self.tracked.values()} | (
            {self.postmaster} if self.postmaster is not None else set())
        postgres = 0
        others: dict[int, tuple[int, str]] = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            stat = _proc_stat(pid)
            if stat is None:
                continue
            if pid == self.postmaster:
                postgres += sum(stat[1])
            elif stat[0] == self.postmaster:
                postgres += stat[1][0] + stat[1][1]
            elif pid not in ours and stat[0] not in ours:
                others[pid] = (stat[1][0] + stat[1][1], "")
        if self.postmaster is not None:
            seconds["postgres"] = postgres / TICK
        times = os.times()
        seconds["harness"] = times.user + times.system
        busy, total = _machine_ticks()
        seconds["machine"] = busy / TICK
        seconds["machine_total"] = total / TICK
        return CpuSample(at=time.monotonic(), seconds=seconds, others=others, switches=switches)


def cpu_share(before: CpuSample, after: CpuSample) -> dict[str, float]:
    """Percent of one CPU used by each accounted part between two samples; ``machine`` is
    the busy share of all CPUs together (200 % = both CPUs of a 2-CPU machine busy), and
    ``other`` what the machine spent outside the parts we started (e.g. other users)."""
    wall = after.at - before.at
    if wall <= 0:
        return {}
    share = {name: round(100 * (after.seconds[name] - before.seconds.get(name, 0.0)) / wall, 1)
             for name in after.seconds if name != "machine_total"}
    total = after.seconds["machine_total"] - before.seconds["machine_total"]
    ncpu = os.cpu_count() or 1
    share["machine"] = round(100 * ncpu * (after.seconds["machine"] - before.seconds["machine"])
                             / total, 1) if total > 0 else 0.0
    ours = sum(v for k, v in share.items() if k != "machine" and not k.endswith(CHILDREN))
    share["other"] = round(max(0.0, share["machine"] - ours), 1)
    return share


def top_others(before: CpuSample, after: CpuSample, count: int = 5) -> list[dict[str, Any]]:
    """The other processes (alive at both samples) that used the most CPU in between."""
    wall = after.at - before.at
    deltas = sorted(((ticks - before.others[pid][0], pid) for pid, (ticks, _) in
                     after.others.items() if pid in before.others), reverse=True)
    return [{"pid": pid, "percent": round(100 * delta / TICK / wall, 1), "command": _command(pid)}
            for delta, pid in deltas[:count] if delta > 0 and wall > 0]


def cpu_text(share: dict[str, float]) -> str:
    parts = [f"{name} {value:.0f}%" for name, value in share.items()
             if name not in ("machine", "other", "harness") and not name.endswith(CHILDREN)]
    return (", ".join(parts) + f"; machine {share.get('machine', 0):.0f}% of "
            f"{100 * (os.cpu_count() or 1)}%, other {share.get('other', 0):.0f}%")


def switches_between(before: CpuSample, after: CpuSample) -> dict[str, int]:
    """Context switches of each process tracked apart between two samples."""
    return {name: after.switches[name] - before.switches[name]
            for name in after.switches if name in before.switches}
