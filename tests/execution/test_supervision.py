"""How the executor supervises a command to its end (execution/command.py, ``supervise``): the
job's own thread copies the output and reaps the leader, kills what outlives a timeout or
holds the output after the leader exited, and job threads are reused across Runs."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.execution import command
from qinglong.testing import FakeClock
from tests.conftest import SqliteStores
from tests.execution.test_local_executor import admit, log_text, wait_terminal
from tests.support.processes import process_running


def wait_dead(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while process_running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not process_running(pid)


def test_a_child_holding_the_output_after_its_leader_exited_is_killed_and_the_run_ends(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    spec = CommandSpec(command=ShellCommand(
        command=f"echo leader-said-this; sleep 60 & echo $! > {pidfile}"))
    [run_id] = admit(sqlite_stores, clock, spec)
    make_executor().start()
    detail = wait_terminal(sqlite_stores, run_id)
    assert (detail.run.status, detail.attempts[0].exit_code) == ("succeeded", 0)
    assert "leader-said-this" in log_text(detail)
    assert wait_dead(int(pidfile.read_text())), "the child holding the output survived"


def test_a_command_that_ignores_sigterm_at_its_timeout_is_killed_after_the_grace(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor
) -> None:
    spec = CommandSpec(command=ShellCommand(command="trap '' TERM; echo started; sleep 60"),
                       timeout_ms=300)
    [run_id] = admit(sqlite_stores, clock, spec)
    make_executor().start()
    detail = wait_terminal(sqlite_stores, run_id)
    assert (detail.run.status, detail.run.error_code) == ("timed_out", "TIMEOUT")
    assert "started" in log_text(detail)


def test_output_far_beyond_a_pipe_is_kept_whole_while_the_job_thread_pumps_it(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor
) -> None:
    lines = 40_000  # about 1.3 MB: twenty pipes' worth, written as fast as the shell can
    spec = CommandSpec(command=ShellCommand(
        command=f"i=0; while [ $i -lt {lines} ]; do echo line-$i-of-output; i=$((i+1)); done"))
    [run_id] = admit(sqlite_stores, clock, spec)
    make_executor(log_max_bytes=4 * 1024 * 1024).start()
    detail = wait_terminal(sqlite_stores, run_id)
    assert detail.run.status == "succeeded"
    text = log_text(detail).splitlines()
    assert text == [f"line-{i}-of-output" for i in range(lines)]


def test_job_threads_and_their_connections_are_reused_across_runs(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor
) -> None:
    """Twelve Runs on two slots take at most two job threads; before, each Run had a thread
    of its own, and each such thread opened (and kept) an SQLite connection of its own."""
    run_ids = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="true")),
                    runs=12)
    opened_before = sqlite_stores.db.open_connections()
    executor = make_executor(concurrency=2)
    executor.start()
    details = [wait_terminal(sqlite_stores, r) for r in run_ids]
    assert all(d.run.status == "succeeded" for d in details)
    assert executor._runners <= 2
    # the dispatcher's, the lease keeper's and the job threads' connections at most
    assert sqlite_stores.db.open_connections() - opened_before <= 2 + 3


def test_without_pidfds_the_output_is_pumped_on_a_thread_with_the_same_outcome(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor, monkeypatch
) -> None:
    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(errno.ENOSYS, "pidfd_open is not implemented")

    monkeypatch.setattr(command.os, "pidfd_open", no_pidfd)
    ok = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(
        command="echo from-the-thread; exit 3")), task="exits")
    slow = admit(sqlite_stores, clock, CommandSpec(command=ShellCommand(command="sleep 60"),
                                                   timeout_ms=300), task="sleeps")
    make_executor().start()
    exited, timed_out = wait_terminal(sqlite_stores, ok[0]), wait_terminal(sqlite_stores, slow[0])
    assert (exited.run.status, exited.attempts[0].exit_code) == ("failed", 3)
    assert "from-the-thread" in log_text(exited)
    assert (timed_out.run.status, timed_out.run.error_code) == ("timed_out", "TIMEOUT")


def test_every_command_reads_an_empty_stdin_from_one_descriptor_of_dev_null(
    sqlite_stores: SqliteStores, clock: FakeClock, make_executor
) -> None:
    """A command's standard input is /dev/null, opened once for all of them, and reading it
    ends at once (`command.empty_stdin`)."""
    spec = CommandSpec(command=ShellCommand(command="readlink /proc/self/fd/0; cat; echo end"))
    run_ids = admit(sqlite_stores, clock, spec, runs=3)
    make_executor(concurrency=2).start()
    details = [wait_terminal(sqlite_stores, r) for r in run_ids]
    assert [(d.run.status, log_text(d).splitlines()) for d in details] == [
        ("succeeded", ["/dev/null", "end"])] * 3
    descriptor = command.empty_stdin()
    assert command.empty_stdin() == descriptor
    assert os.path.samestat(os.fstat(descriptor), os.stat(os.devnull))
