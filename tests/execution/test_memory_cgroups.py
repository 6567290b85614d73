"""Memory limits held by a cgroup per command (issue 21, item 4; docs/controls/limits.md),
with real child processes on a real SQLite store, where this host lets the executor make
cgroups (CI runs as root on a machine whose memory controller is cgroup v1: these run there):

- a command that touches more resident memory than its limit is killed by the kernel and its
  Attempt ends MEMORY_LIMIT, and its cgroup is removed afterwards;
- the limit counts resident memory, not address space: a command that reserves far more than
  its limit but touches little succeeds (setrlimit would refuse the reservation);
- the command and what it starts are in the group; a run-as user's command joins it too;
- a group that cannot be made falls back to setrlimit, said in the log;
- where a memory cgroup could be made is read from /proc (v2 first, v1 otherwise).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from qinglong.domain.limits import ResourceLimits
from qinglong.domain.task import ArgvCommand, CommandSpec, ShellCommand
from qinglong.execution.cgroups import JOIN, V1, V2, MemoryCgroups, candidates, detect
from qinglong.execution.identity import NICE, PRLIMIT, Identity, RunAs
from tests.execution.test_local_executor import log_text

pytestmark = pytest.mark.slow

MiB = 1024**2
TOUCH = "import sys; b = b'x' * (int(sys.argv[1]) * 1024 * 1024); print('touched', len(b))"
RESERVE = ("import mmap, sys; m = mmap.mmap(-1, int(sys.argv[1]) * 1024 * 1024); "
           "m[: 8 * 1024 * 1024] = b'y' * (8 * 1024 * 1024); print('reserved', len(m))")


def host_cgroups() -> MemoryCgroups:
    if os.geteuid() != 0:  # never a silent skip: CI runs as root, so these run there
        pytest.fail("making cgroups on this host needs root: run this test as root (as CI does)")
    found = detect()
    if found is None:
        pytest.fail("no memory cgroup can be made here (no writable cgroup v1 memory hierarchy "
                    "and no delegated cgroup v2 memory controller)")
    return found


def python(script: str, *args: str, memory: int) -> CommandSpec:
    return CommandSpec(command=ArgvCommand(file=sys.executable, args=("-c", script, *args)),
                       limits=ResourceLimits(memory_bytes=memory), timeout_ms=60_000)


def test_touching_more_than_the_limit_is_killed_and_named_memory_limit(run) -> None:
    groups = host_cgroups()
    identity = Identity(cgroups=groups)
    small = run(python(TOUCH, "16", memory=96 * MiB), identity, task="small")
    assert small.run.status == "succeeded", small.attempts
    assert log_text(small).strip() == f"touched {16 * MiB}"
    big = run(python(TOUCH, "400", memory=96 * MiB), identity, task="big")
    [attempt] = big.attempts
    assert (big.run.status, attempt.error_code) == ("failed", "MEMORY_LIMIT"), attempt
    assert "memory limit" in (attempt.error_summary or "")
    assert not (groups.base / f"ql-{attempt.id}").exists()  # removed once it ended


def test_the_cgroup_counts_resident_memory_not_address_space(run) -> None:
    identity = Identity(cgroups=host_cgroups())
    detail = run(python(RESERVE, "1024", memory=64 * MiB), identity)
    assert detail.run.status == "succeeded", detail.attempts
    assert log_text(detail).strip() == f"reserved {1024 * MiB}"
    # the same reservation under setrlimit's address-space limit fails
    bounded = run(python(RESERVE, "1024", memory=64 * MiB), Identity(), task="rlimit")
    assert bounded.run.status == "failed", bounded.attempts


def test_the_command_and_what_it_starts_are_in_its_group_even_as_the_run_as_user(run) -> None:
    groups = host_cgroups()
    spec = CommandSpec(command=ShellCommand(command="grep memory /proc/self/cgroup; "
                                                   "sh -c 'grep memory /proc/self/cgroup'; id -u"),
                       limits=ResourceLimits(memory_bytes=64 * MiB))
    detail = run(spec, Identity(cgroups=groups, run_as=RunAs.lookup("nobody")))
    assert detail.run.status == "succeeded", detail.attempts
    [attempt] = detail.attempts
    *memberships, uid = log_text(detail).splitlines()
    wanted = f"ql-{attempt.id}"
    if groups.layout.version == 2:  # v2 lists one line "0::/path"
        memberships = [line for line in log_text(detail).splitlines() if line.startswith("0::")]
    assert len(memberships) == 2 and all(m.endswith("/" + wanted) for m in memberships), \
        memberships
    assert int(uid) == RunAs.lookup("nobody").uid


def test_a_group_that_cannot_be_made_falls_back_to_setrlimit(run, tmp_path: Path) -> None:
    nowhere = MemoryCgroups(base=tmp_path / "no-such-hierarchy", layout=V1)
    detail = run(python(TOUCH, "16", memory=256 * MiB), Identity(cgroups=nowhere))
    assert detail.run.status == "succeeded", detail.attempts
    assert "no memory cgroup" in log_text(detail)
    assert "applied with setrlimit" in log_text(detail)


def _proc(tmp_path: Path, mountinfo: str, cgroup: str) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "mountinfo").write_text(mountinfo)
    (proc / "cgroup").write_text(cgroup)
    return proc


def test_where_a_group_could_be_made_is_read_from_proc(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    (v2 / "svc").mkdir(parents=True)
    (v2 / "svc" / "cgroup.subtree_control").write_text("cpu memory pids\n")
    proc = _proc(tmp_path,
                 f"41 31 0:38 / {v2} rw,relatime - cgroup2 cgroup2 rw\n"
                 f"35 31 0:32 /outer {tmp_path / 'v1'} rw - cgroup cgroup rw,memory\n",
                 "4:memory:/outer/inner\n0::/svc\n")
    found = candidates(proc)
    assert [(c.base, c.layout) for c in found] == [
        (v2 / "svc", V2), (tmp_path / "v1" / "inner", V1)]
    # without the memory controller enabled for its children, v2 is no place for them
    (v2 / "svc" / "cgroup.subtree_control").write_text("cpu\n")
    assert [c.layout for c in candidates(proc)] == [V1]
    # a hierarchy whose files cannot be written is found, but detect() takes none of it
    assert detect(proc) is None


def test_a_command_with_a_group_joins_it_first_and_keeps_only_the_cpu_rlimit(
        tmp_path: Path) -> None:
    group = MemoryCgroups(base=tmp_path, layout=V1).create("ql-a1", 64 * MiB)
    limits = ResourceLimits(memory_bytes=64 * MiB, cpu_seconds=5)
    argv = Identity(nice=3).argv(["/bin/true"], limits, group)
    assert argv[:5] == [*group.prefix()] and argv[1:3] == ["-c", JOIN]
    assert argv[4] == str(tmp_path / "ql-a1" / "cgroup.procs")
    rest = argv[5:]
    assert rest[:3] == [NICE, "-n", "3"] and rest[3] == PRLIMIT
    assert rest[4:] == ["--cpu=5:10", "--", "/bin/true"]  # no --as: the group holds memory
    assert (tmp_path / "ql-a1" / "memory.limit_in_bytes").read_text() == str(64 * MiB)
