"""A memory cgroup per command, where the host lets the executor make one (issue 21, item 4;
docs/controls/limits.md).

A task's memory limit is enforced by the kernel's memory controller when the executor may
create cgroups under its own: each command that has a memory limit gets a cgroup of its own
(``ql-<attempt id>``) holding exactly that limit on resident memory, it joins that cgroup
before its first instruction (a shell writes its own pid into the group and then execs the
rest), everything it starts stays in it, and when it has ended the executor reads whether the
kernel killed something in it for the limit (the ``oom_kill`` count) and removes the group.
That is what ``setrlimit`` cannot do: count resident memory rather than address space, and
say that the limit was the cause.

Both cgroup versions are handled (they differ in file names only, as far as this goes):

- v2 (``memory.max``, ``memory.events``): the executor's own cgroup must have the memory
  controller enabled for its children (``cgroup.subtree_control``), as a systemd unit with
  ``Delegate=yes`` (or a container given its cgroup) has;
- v1 (``memory.limit_in_bytes``, ``memory.oom_control``): the executor must be able to make
  directories in its memory hierarchy (root, usually).

``detect`` decides once, at start: it makes and removes a probe group. Where it cannot, the
executor uses ``setrlimit`` (identity.py), and says which it uses (`ql worker --help`,
`/status`).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

PROC_SELF = Path("/proc/self")
SH = shutil.which("sh") or "/bin/sh"
# The shell that joins a command to its cgroup: $1 is the group's cgroup.procs, the rest is
# the command line it then becomes (exec: the same pid).
JOIN = 'echo $$ > "$1" && shift && exec "$@"'


@dataclass(frozen=True, slots=True)
class Layout:
    """The names one cgroup version gives the files this uses."""

    version: int
    limit: str  # the memory limit, in bytes
    events: str  # where the kernel counts its OOM kills ("oom_kill N")


V2 = Layout(version=2, limit="memory.max", events="memory.events")
V1 = Layout(version=1, limit="memory.limit_in_bytes", events="memory.oom_control")


@dataclass(frozen=True, slots=True)
class RunGroup:
    """The cgroup of one command."""

    path: Path
    layout: Layout

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def prefix(self) -> list[str]:
        """What starts the command inside the group."""
        return [SH, "-c", JOIN, "ql-cgroup", str(self.procs)]

    def oom_kills(self) -> int:
        """How many processes the kernel killed in this group at its memory limit."""
        try:
            text = (self.path / self.layout.events).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def remove(self) -> None:
        """Remove the group (its processes have all ended; a straggler keeps it, harmlessly,
        until the next removal of the same name fails the same way)."""
        try:
            self.path.rmdir()
        except OSError:
            pass


@dataclass(frozen=True, slots=True)
class MemoryCgroups:
    """Where this executor makes its commands' cgroups."""

    base: Path
    layout: Layout

    def describe(self) -> str:
        return f"cgroup v{self.layout.version} memory controller under {self.base}"

    def create(self, name: str, limit_bytes: int, owner_uid: int | None = None) -> RunGroup:
        """A group ``name`` limited to ``limit_bytes`` (OSError when it cannot be made; the
        caller falls back to setrlimit). ``owner_uid``: the run-as user, who must be able to
        move its own shell into the group."""
        path = self.base / name
        try:
            path.mkdir()
        except FileExistsError:  # left by a command of the same Attempt that outlived it
            pass
        group = RunGroup(path=path, layout=self.layout)
        try:
            (path / self.layout.limit).write_text(str(limit_bytes))
            if owner_uid is not None:
                os.chown(group.procs, owner_uid, -1)
        except OSError:
            group.remove()
            raise
        return group


def _mounts(proc: Path) -> dict[str, tuple[Path, str]]:
    """The cgroup mounts: ``"2"`` for the v2 one, else each v1 controller's name, to (mount
    point, the root of the hierarchy it shows)."""
    found: dict[str, tuple[Path, str]] = {}
    try:
        lines = (proc / "mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        head, sep, tail = line.partition(" - ")
        if not sep:
            continue
        fields, extra = head.split(), tail.split()
        if len(fields) < 5 or len(extra) < 3:
            continue
        if extra[0] == "cgroup2":
            found["2"] = (Path(fields[4]), fields[3])
        elif extra[0] == "cgroup":
            for option in extra[2].split(","):
                found.setdefault(option, (Path(fields[4]), fields[3]))
    return found


def _own_groups(proc: Path) -> dict[str, str]:
    """This process's cgroup path per hierarchy: ``"2"`` for v2, else per v1 controller."""
    groups: dict[str, str] = {}
    try:
        lines = (proc / "cgroup").read_text().splitlines()
    except OSError:
        return groups
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            groups["2"] = path
        for controller in controllers.split(","):
            groups.setdefault(controller, path)
    return groups


def _joined(mount: Path, root: str, path: str) -> Path:
    relative = path[len(root):] if root != "/" and path.startswith(root) else path
    return mount / relative.lstrip("/")


def candidates(proc: Path = PROC_SELF) -> list[MemoryCgroups]:
    """Where a memory cgroup could be made for a child of this process, v2 first."""
    mounts, groups = _mounts(proc), _own_groups(proc)
    found = []
    if "2" in mounts and "2" in groups:
        mount, root = mounts["2"]
        base = _joined(mount, root, groups["2"])
        try:
            enabled = (base / "cgroup.subtree_control").read_text().split()
        except OSError:
            enabled = []
        if "memory" in enabled:
            found.append(MemoryCgroups(base=base, layout=V2))
    if "memory" in mounts and "memory" in groups:
        mount, root = mounts["memory"]
        found.append(MemoryCgroups(base=_joined(mount, root, groups["memory"]), layout=V1))
    return found


def detect(proc: Path = PROC_SELF) -> MemoryCgroups | None:
    """The first place where a probe group can be made (and set, and removed) now; None:
    none, and memory limits are applied with setrlimit."""
    for place in candidates(proc):
        try:
            probe = place.create(f"ql-probe-{os.getpid()}", 1 << 30)
        except OSError:
            continue
        probe.remove()
        if not probe.path.exists():
            return place
    return None
