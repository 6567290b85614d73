"""Resource limits and identity (issue 21, item 4) with real child processes on a real SQLite
store: a task's CPU-time limit stops a busy command and its Attempt ends CPU_LIMIT; its memory
limit makes a larger allocation fail inside the command (and a smaller one succeed); an
executor's niceness and run-as user are the command's own, and its environment names that
user; a limit the host cannot apply fails the Run with that reason instead of running it
unbounded."""

from __future__ import annotations

import os
import pwd
import sys
from pathlib import Path

import pytest

from qinglong.domain.limits import ResourceLimits
from qinglong.domain.parameters import Parameter, ParamType
from qinglong.domain.task import ArgvCommand, CommandSpec, ShellCommand
from qinglong.errors import InvalidConfig
from qinglong.execution import command as command_module
from qinglong.execution.identity import Identity, RunAs
from tests.execution.test_local_executor import log_text

pytestmark = pytest.mark.slow

MiB = 1024**2


def test_a_busy_command_is_stopped_at_its_cpu_limit(run) -> None:
    spec = CommandSpec(command=ShellCommand(command="exec sh -c 'while :; do :; done'"),
                       limits=ResourceLimits(cpu_seconds=1), timeout_ms=60_000)
    detail = run(spec)
    [attempt] = detail.attempts
    assert (detail.run.status, attempt.error_code) == ("failed", "CPU_LIMIT"), attempt
    assert attempt.error_summary == "stopped at its CPU-time limit (SIGXCPU)"


def test_the_memory_limit_bounds_what_the_command_may_allocate(run) -> None:
    grab = "import sys; b = bytearray(int(sys.argv[1]) * 1024 * 1024); print('got', len(b))"
    limits = ResourceLimits(memory_bytes=256 * MiB)
    small = run(CommandSpec(command=ArgvCommand(file=sys.executable, args=("-c", grab, "16")),
                            limits=limits), task="small")
    assert small.run.status == "succeeded", small.attempts
    assert log_text(small).strip() == f"got {16 * MiB}"
    big = run(CommandSpec(command=ArgvCommand(file=sys.executable, args=("-c", grab, "512")),
                          limits=limits), task="big")
    [attempt] = big.attempts
    assert (big.run.status, attempt.error_code) == ("failed", "EXIT_NONZERO"), attempt
    assert "MemoryError" in log_text(big)


def test_a_limit_the_host_cannot_apply_fails_the_run(run, monkeypatch) -> None:
    monkeypatch.setattr(command_module, "PRLIMIT", "/nonexistent/prlimit")
    detail = run(CommandSpec(command=ShellCommand(command="echo never"),
                             limits=ResourceLimits(cpu_seconds=5)))
    [attempt] = detail.attempts
    assert (detail.run.status, attempt.error_code) == ("failed", "LIMITS_UNAVAILABLE")
    assert "never" not in log_text(detail)


def test_commands_run_at_the_executors_niceness(run) -> None:
    detail = run(CommandSpec(command=ShellCommand(command="cut -d' ' -f19 /proc/self/stat")),
                 Identity(nice=7))
    own = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[16])
    assert int(log_text(detail).strip()) == min(19, own + 7)


def test_a_root_executor_runs_commands_as_the_run_as_user(run) -> None:
    if os.geteuid() != 0:  # never a silent skip: CI runs as root, so this runs there
        pytest.fail("running commands as another user needs root: run this test as root "
                    "(as CI does)")
    nobody = pwd.getpwnam("nobody")
    detail = run(CommandSpec(command=ShellCommand(command='id -u; id -G; echo "$USER $HOME"')),
                 Identity(run_as=RunAs.lookup("nobody")))
    assert detail.run.status == "succeeded", detail.attempts
    uid, groups, names = log_text(detail).splitlines()
    assert int(uid) == nobody.pw_uid
    assert groups.split() == [str(nobody.pw_gid)]  # root's groups are dropped
    assert names == f"nobody {nobody.pw_dir}"


def test_run_as_is_refused_where_it_cannot_work() -> None:
    with pytest.raises(InvalidConfig, match="needs a worker started as root"):
        RunAs.lookup("nobody", euid=1000)
    with pytest.raises(InvalidConfig, match="no user"):
        RunAs.lookup("no-such-user-here", euid=0)
    with pytest.raises(InvalidConfig, match="names root"):
        RunAs.lookup("root", euid=0)
    with pytest.raises(InvalidConfig, match="nice"):
        Identity(nice=20)


def test_parameters_reach_the_command(run) -> None:
    """A Run's values (the defaults here: the scheduler admitted it) are environment variables
    of the parameters' names, and an argv task's {{NAME}} placeholders (issue 21, item 3)."""
    declared = (Parameter(name="who", type=ParamType.STRING, default="a b; echo no"),
                Parameter(name="count", type=ParamType.INTEGER, default=3))
    shell = run(CommandSpec(command=ShellCommand(command='echo "[$who] [$count]"'),
                            parameters=declared), task="shell")
    assert log_text(shell).splitlines() == ["[a b; echo no] [3]"]
    argv = run(CommandSpec(command=ArgvCommand(file="/bin/echo",
                                               args=("{{who}}", "n={{count}}", "{{other}}")),
                           parameters=declared), task="argv")
    assert log_text(argv).splitlines() == ["a b; echo no n=3 {{other}}"]
