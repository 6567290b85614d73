"""Who a command runs as and what bounds it (issue 21, item 4; docs/controls/limits.md): an
executor's niceness and run-as user, and a task's resource limits, turned into how the
command is started.

Limits are set with ``setrlimit`` by util-linux's ``prlimit`` and niceness by ``nice``: each
sets its own process's value and then execs the next program, so the command (same pid, the
leader of its own process group) and everything it starts inherit them, from its first
instruction. No cgroup is made: the hosts we run on do not all delegate cgroup v2 to an
unprivileged service, and ``setrlimit`` works everywhere; what that means for memory is in
the document above.
"""

from __future__ import annotations

import os
import pwd
import shutil
from dataclasses import dataclass

from qinglong.domain.limits import ResourceLimits
from qinglong.errors import InvalidConfig

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

    def __post_init__(self) -> None:
        if isinstance(self.nice, bool) or not isinstance(self.nice, int) or \
                not 0 <= self.nice <= MAX_NICE:
            raise InvalidConfig("nice", f"must be between 0 and {MAX_NICE}")

    @classmethod
    def of(cls, nice: int, run_as: str | None) -> Identity:
        """From the flags (InvalidConfig for a --run-as this process cannot use)."""
        return cls(nice=nice, run_as=None if run_as is None else RunAs.lookup(run_as))

    def argv(self, argv: list[str], limits: ResourceLimits) -> list[str]:
        """``argv`` behind the programs that set the limits and the niceness."""
        prefix: list[str] = []
        if self.nice:
            prefix += [NICE, "-n", str(self.nice)]
        if not limits.empty:
            prefix += [PRLIMIT, *limits.prlimit_args(), "--"]
        return prefix + argv

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The command's environment, with HOME, USER and LOGNAME of the run-as user."""
        if self.run_as is not None:
            env.update(HOME=self.run_as.home, USER=self.run_as.name, LOGNAME=self.run_as.name)
        return env


def limits_support() -> str:
    """What this host can apply, for `ql worker --help` and /status."""
    if not os.access(PRLIMIT, os.X_OK):
        return "unavailable: util-linux prlimit is not installed (tasks with limits fail)"
    return "setrlimit via prlimit (memory: address space; CPU time: SIGXCPU); no cgroups"
