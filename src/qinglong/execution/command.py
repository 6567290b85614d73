"""Running one Attempt's command: environment, working directory, log, timeout, process group.

Everything here is about the child process; recording what happened is the executor's job.
"""

from __future__ import annotations

import math
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from qinglong.domain.command_spec import ArgvCommand, ScriptCommand
from qinglong.domain.lifecycle import Outcome
from qinglong.domain.parameters import substitute, text
from qinglong.domain.runs import AttemptStatus
from qinglong.execution.cgroups import RunGroup
from qinglong.execution.identity import PRLIMIT, Identity
from qinglong.execution.logs import CappedLogPump, private_dir, private_file, private_opener
from qinglong.execution.processes import kill_group
from qinglong.execution.project_env import EnvironmentUnavailable, project_variables
from qinglong.storage.runs.params import AttemptLease

PLAIN = Identity()
KILL_GRACE_S = 2.0
STRAGGLER_WAIT_S = 2.0
INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME", "SHELL")

_stdin_lock = threading.Lock()
_stdin: list[int] = []


def empty_stdin() -> int:
    """A descriptor of /dev/null, opened once per process, that every command gets as its
    standard input (``subprocess.DEVNULL`` opens and closes /dev/null for each command: two
    system calls a Run, each a chance for another thread to take the interpreter lock)."""
    if not _stdin:
        with _stdin_lock:
            if not _stdin:
                _stdin.append(os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC))
    return _stdin[0]


def failed(code: str, summary: str, exit_code: int | None = None,
           log_path: Path | None = None) -> Outcome:
    return Outcome(status=AttemptStatus.FAILED, exit_code=exit_code, error_code=code,
                   error_summary=summary, log_path=None if log_path is None else str(log_path))


def environment(lease: AttemptLease, inherited: Mapping[str, str]) -> dict[str, str]:
    """What the child sees: a few inherited variables, the project's environment, the
    task's entries, and QL_* facts (a project secret that cannot be opened raises an
    OSError: the command does not start)."""
    assert lease.execution is not None
    env = {name: inherited[name] for name in INHERITED_ENV if name in inherited}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(project_variables(lease.environment, inherited))
    env.update({entry.name: entry.value for entry in lease.execution.plan.environment})
    env.update({name: text(value) for name, value in lease.parameters.items()})
    fence = lease.fence
    env["QL_RUN_ID"] = fence.run_id
    env["QL_ATTEMPT_ID"] = fence.attempt_id
    env["QL_ATTEMPT"] = str(lease.attempt)
    env["QL_LEASE_GENERATION"] = str(fence.generation)
    env["QL_PROJECT_ID"] = lease.project_id
    env["QL_TASK_ID"] = lease.task_id
    if lease.trigger_id is not None:
        env["QL_TRIGGER_ID"] = lease.trigger_id
    if lease.scheduled_for_ms is not None:
        env["QL_SCHEDULED_FOR_MS"] = str(lease.scheduled_for_ms)
        env["QL_SCHEDULED_FOR"] = (
            datetime.fromtimestamp(lease.scheduled_for_ms / 1000, UTC)
            .isoformat(timespec="milliseconds").replace("+00:00", "Z"))
    return env


@dataclass(slots=True)
class Spawned:
    process: subprocess.Popen[bytes]
    pump: CappedLogPump
    log_path: Path
    group: RunGroup | None = None  # its memory cgroup, removed once it has ended

    def memory_killed(self) -> bool:
        """Whether the kernel killed a process of the command at its memory limit (read,
        then the cgroup removed: call once, after the command ended)."""
        if self.group is None:
            return False
        killed = self.group.oom_kills() > 0
        self.group.remove()
        return killed


LOG_PREPARE_TRIES = 3


def prepare_log(log_dir: Path, lease: AttemptLease, *, spool: bool = False) -> Path | Outcome:
    """The Attempt's log file (its directory made), or the failure that prevents it.

    A kept log goes into the Run's own directory (``<log dir>/<run id>/attempt-<n>.log``,
    which `ql run logs` and the pruner read). A ``spool`` file (a worker ships the output and
    removes the file when the Attempt ends) goes straight into ``log_dir`` as
    ``<run id>.attempt-<n>.log``: no directory is made for it, and none is left behind."""
    if spool:
        path = log_dir / f"{lease.fence.run_id}.attempt-{lease.attempt}.log"
    else:
        path = run_dir(log_dir, lease) / f"attempt-{lease.attempt}.log"
    make_dir = not spool  # a Run's directory is new; the spool is there, unless removed
    for _ in range(LOG_PREPARE_TRIES):
        try:
            if make_dir:
                private_dir(path.parent)
            private_file(path)
            return path
        except FileNotFoundError:
            # the log pruner removed the new, still empty directory, or the spool is gone
            make_dir = True
            continue
        except OSError as exc:
            return failed("LOG_UNWRITABLE", f"cannot write the log {str(path)!r}: "
                                            f"{exc.strerror or exc}")
    return failed("LOG_UNWRITABLE", f"cannot write the log {str(path)!r}: "
                                    "its directory keeps disappearing")


def run_dir(log_dir: Path, lease: AttemptLease) -> Path:
    """The Run's own directory under ``log_dir``: its kept logs, and its Attempts' scripts."""
    return log_dir / lease.fence.run_id


def spawn(lease: AttemptLease, log_path: Path, *, default_cwd: str, inherited: Mapping[str, str],
          log_max_bytes: int, tap: Callable[[bytes], None] | None = None,
          identity: Identity = PLAIN, script: Path | None = None,
          pull: tuple[list[str], Mapping[str, str]] | None = None) -> Spawned | Outcome:
    """Start the command in its own process group with its output going to ``log_path`` (the
    file `prepare_log` made, opened only when output comes), at
    the executor's niceness, as its run-as user, under the task's resource limits (a script
    task: its interpreter on ``script``, the pinned content written there; a subscription's
    pull: ``pull``'s argv with its extra environment, which no other command gets)."""
    execution = lease.execution
    assert execution is not None
    cwd = execution.plan.working_directory or default_cwd
    if not os.path.isdir(cwd):
        message = f"working directory {cwd!r} does not exist on this host"
        _note(log_path, message)
        return failed("WORKING_DIRECTORY_MISSING", message, log_path=log_path)
    limits = execution.plan.limits
    if not limits.empty and not os.access(PRLIMIT, os.X_OK):
        message = f"the task has resource limits and {PRLIMIT} (util-linux) is not installed"
        _note(log_path, message)
        return failed("LIMITS_UNAVAILABLE", message, log_path=log_path)
    argv = execution.argv()
    plan = execution.plan.command
    if pull is not None:
        argv = list(pull[0])
    elif isinstance(plan, ScriptCommand):
        assert script is not None
        argv = [plan.interpreter, str(script), *substitute(list(plan.args), lease.parameters)]
    elif isinstance(plan, ArgvCommand) and lease.parameters:
        argv = [argv[0], *substitute(argv[1:], lease.parameters)]
    run_as = identity.run_as
    group = _memory_group(identity, lease, log_path)
    try:
        process = subprocess.Popen(
            identity.argv(argv, limits, group), stdin=empty_stdin(),
            stdout=subprocess.PIPE, bufsize=0,  # the output is read from its descriptor
            stderr=subprocess.STDOUT, cwd=cwd,
            env=identity.environment({**environment(lease, inherited),
                                      **(pull[1] if pull is not None else {})}),
            start_new_session=True,
            close_fds=True, user=None if run_as is None else run_as.uid,
            group=None if run_as is None else run_as.gid,
            extra_groups=None if run_as is None else [],
        )
    except OSError as exc:
        if group is not None:
            group.remove()
        reason = exc.strerror or str(exc)
        _note(log_path, f"could not start the command: {reason}")
        if isinstance(exc, EnvironmentUnavailable):  # nothing started: no partial environment
            return failed("ENVIRONMENT_UNAVAILABLE", reason, log_path=log_path)
        return failed("EXECUTOR_START_FAILED", f"could not start {argv[0]!r}: {reason}",
                      log_path=log_path)
    assert process.stdout is not None
    pump = CappedLogPump(process.stdout, log_path, log_max_bytes, tap=tap, created=True)
    return Spawned(process=process, pump=pump, log_path=log_path, group=group)


def _memory_group(identity: Identity, lease: AttemptLease, log_path: Path) -> RunGroup | None:
    """The memory cgroup of this command, when its task has a memory limit and the executor
    makes cgroups; one that cannot be made now falls back to setrlimit, said in the log."""
    assert lease.execution is not None
    memory = lease.execution.plan.limits.memory_bytes
    if memory is None or identity.cgroups is None:
        return None
    run_as = identity.run_as
    try:
        return identity.cgroups.create(f"ql-{lease.fence.attempt_id}", memory,
                                       None if run_as is None else run_as.uid)
    except OSError as exc:
        _note(log_path, f"no memory cgroup ({exc.strerror or exc}): the memory limit is "
                        "applied with setrlimit (address space)")
        return None


def note(path: Path, message: str) -> None:
    """A line of qinglong's own in the Attempt's log."""
    _note(path, message)


def _note(path: Path, message: str) -> None:
    try:
        with open(path, "a", encoding="utf-8", opener=private_opener) as handle:
            handle.write(f"[qinglong: {message}]\n")
    except OSError:
        pass


def supervise(spawned: Spawned, timeout_s: float) -> tuple[int, bool]:
    """Copy the command's output into its log until the output ends, and reap its leader:
    its exit code, and whether it was stopped at ``timeout_s`` (SIGTERM to its group, then
    SIGKILL after KILL_GRACE_S). Once the leader exited, something else of its group that
    still holds the output open is given STRAGGLER_WAIT_S, then killed, and the output is
    abandoned STRAGGLER_WAIT_S later.

    The calling thread does it all, waiting in one ``poll`` for output, the leader's exit (a
    pidfd, Linux 5.3+) or the next deadline: a thread of its own for the output and
    ``Popen.wait``'s polling with sleeps cost more CPU than the rest of a short command's
    supervision. Without pidfds the output is pumped on a thread. Time is the machine's
    monotonic clock, as for ``Popen.wait``: a child runs in real time whatever clock the
    executor is given."""
    monotonic = time.monotonic
    process, pump = spawned.process, spawned.pump
    assert process.stdout is not None
    try:
        exit_fd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        return _supervise_threaded(spawned, timeout_s)
    output = process.stdout.fileno()
    watch = select.poll()
    watch.register(output, select.POLLIN)
    watch.register(exit_fd, select.POLLIN)
    pump.open()
    deadline = monotonic() + timeout_s  # the next thing to do, if nothing happens first
    timed_out = killed = exited = ended = False
    try:
        while not (exited and ended):
            left_ms = (deadline - monotonic()) * 1000
            events = watch.poll(max(0, min(_POLL_MAX_MS, math.ceil(left_ms))))
            for fd, _ in events:
                if fd == exit_fd:
                    watch.unregister(exit_fd)
                    process.wait()
                    exited = True
                    if timed_out:
                        kill_group(process.pid, signal.SIGKILL)  # stragglers in the group
                    deadline = monotonic() + STRAGGLER_WAIT_S
                elif not pump.pump_once():
                    watch.unregister(output)
                    ended = True
            if events or monotonic() < deadline:
                continue
            if not exited and not timed_out:  # the command's timeout
                timed_out = True
                kill_group(process.pid, signal.SIGTERM)
                deadline = monotonic() + KILL_GRACE_S
            elif not exited:  # it outlived the grace
                kill_group(process.pid, signal.SIGKILL)
                deadline = monotonic() + _POLL_MAX_MS / 1000
            elif not killed:  # the leader is gone; something else holds the output
                killed = True
                kill_group(process.pid, signal.SIGKILL)
                deadline = monotonic() + STRAGGLER_WAIT_S
            else:
                break  # the output is abandoned
    finally:
        os.close(exit_fd)
        pump.close()
    assert process.returncode is not None
    return process.returncode, timed_out


_POLL_MAX_MS = 2**31 - 1  # poll's timeout is a C int of milliseconds


def _supervise_threaded(spawned: Spawned, timeout_s: float) -> tuple[int, bool]:
    """``supervise`` where pidfds are missing: the output pumped on a thread of its own."""
    spawned.pump.start()
    timed_out = False
    try:
        spawned.process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        terminate(spawned.process)
    collect(spawned)
    assert spawned.process.returncode is not None
    return spawned.process.returncode, timed_out


def terminate(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the whole group, SIGKILL it after a grace, and reap the leader."""
    kill_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        kill_group(process.pid, signal.SIGKILL)
        process.wait()
    kill_group(process.pid, signal.SIGKILL)  # stragglers in the group


def collect(spawned: Spawned) -> None:
    """Wait for the output to end; kill the group if something in it still holds the pipe."""
    if not spawned.pump.join(STRAGGLER_WAIT_S):
        kill_group(spawned.process.pid, signal.SIGKILL)
        spawned.pump.join(STRAGGLER_WAIT_S)


def memory_outcome() -> Outcome:
    return failed("MEMORY_LIMIT", "killed by the kernel at its memory limit (the cgroup's "
                                  "OOM killer)")


def exit_outcome(code: int) -> Outcome:
    if code == -signal.SIGXCPU:  # sent only when RLIMIT_CPU (the task's CPU limit) is reached
        return failed("CPU_LIMIT", "stopped at its CPU-time limit (SIGXCPU)")
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        return failed("KILLED_BY_SIGNAL", f"terminated by {name}")
    if code == 0:
        return Outcome(status=AttemptStatus.SUCCEEDED, exit_code=0)
    return failed("EXIT_NONZERO", f"exited with code {code}", exit_code=code)
