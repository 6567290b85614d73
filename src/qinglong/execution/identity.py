"""Who a command runs as and what bounds it (issue 21, item 4; docs/controls/limits.md): an
executor's niceness and run-as user, and a task's resource limits, turned into how the
command is started.

Limits are set with ``setrlimit`` by util-linux's ``prlimit`` and niceness by ``nice``: each
sets its own process's value and then execs the next program, so the command (same pid, the
leader of its own process group) and everything it starts inherit them, from its first
instruction. Where the executor may create cgroups (cgroups.py), a memory limit is a memory
cgroup's instead, which the command joins first, the same way; the CPU-time limit stays
``setrlimit``'s (a cgroup bounds CPU bandwidth, not time).
"""

from __future__ import annotations

import os
import pwd
import shutil
from dataclasses import dataclass

from qinglong.domain.limits import ResourceLimits
from qinglong.errors import InvalidConfig
from qinglong.execution.cgroups import MemoryCgroups, RunGroup, detect

MAX_NICE = 19
PRLIMIT = shutil.which("prlimit") or "/usr/bin/prlimit"
NICE = shutil.which("nice") or "/usr/bin/nice"


@dataclass(frozen=True, slots=True)
class RunAs:
    """The account a root executor starts commands as."""

    name: str
    uid: int
    gid: int
    home: str

    @classmethod
    def lookup(cls, name: str, *, euid: int | None = None) -> RunAs:
        """The account ``name``; refused unless this process runs as root (only root can
        become another user) and the account exists and is not root itself."""
        if (os.geteuid() if euid is None else euid) != 0:
            raise InvalidConfig("run-as", "needs a worker started as root (only root can run "
                                          "commands as another user)")
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise InvalidConfig("run-as", f"no user {name!r} on this host") from None
        if entry.pw_uid == 0:
            raise InvalidConfig("run-as", "names root: leave --run-as out to run as root")
        return cls(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid,
                   home=entry.pw_dir)


@dataclass(frozen=True, slots=True)
class Identity:
    """How an executor starts every command: at this niceness, as this user."""

    nice: int = 0
    run_as: RunAs | None = None
    cgroups: MemoryCgroups | None = None  # where memory cgroups are made (None: setrlimit)

    def __post_init__(self) -> None:
        if isinstance(self.nice, bool) or not isinstance(self.nice, int) or \
                not 0 <= self.nice <= MAX_NICE:
            raise InvalidConfig("nice", f"must be between 0 and {MAX_NICE}")

    @classmethod
    def of(cls, nice: int, run_as: str | None, *, use_cgroups: bool = True) -> Identity:
        """From the flags (InvalidConfig for a --run-as this process cannot use); with memory
        cgroups where this host lets the executor make them."""
        return cls(nice=nice, run_as=None if run_as is None else RunAs.lookup(run_as),
                   cgroups=detect() if use_cgroups else None)

    def argv(self, argv: list[str], limits: ResourceLimits,
             group: RunGroup | None = None) -> list[str]:
        """``argv`` behind the programs that join its cgroup (``group``: the memory limit is
        that group's) and set the other limits and the niceness."""
        prefix: list[str] = group.prefix() if group is not None else []
        if self.nice:
            prefix += [NICE, "-n", str(self.nice)]
        rlimits = limits.prlimit_args(memory=group is None)
        if rlimits:
            prefix += [PRLIMIT, *rlimits, "--"]
        return prefix + argv

    def limits_support(self) -> str:
        """What this executor applies, for /status."""
        if self.cgroups is None:
            return limits_support()
        return (f"memory: a {self.cgroups.describe()} per command (resident memory, "
                "MEMORY_LIMIT when the kernel kills for it); CPU time: setrlimit via prlimit "
                "(SIGXCPU)")

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The command's environment, with HOME, USER and LOGNAME of the run-as user."""
        if self.run_as is not None:
            env.update(HOME=self.run_as.home, USER=self.run_as.name, LOGNAME=self.run_as.name)
        return env


def limits_support() -> str:
    """What this host can apply without cgroups, for `ql worker --help` and /status."""
    if not os.access(PRLIMIT, os.X_OK):
        return "unavailable: util-linux prlimit is not installed (tasks with limits fail)"
    return ("setrlimit via prlimit (memory: address space; CPU time: SIGXCPU); no memory "
            "cgroup can be made here")
