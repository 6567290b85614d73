"""`run_ql` and `start_ql` (tests/support/ql_process.py) behave as a started
`python -m qinglong` does: the same exit code, standard output and error for the same argv,
environment, working directory and standard input; a timeout is a timeout; long-running ones
run side by side and answer to signals by pid."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ql_process
from tests.support.ql import wait_for
from tests.support.ql_process import ForkedQl, run_ql, start_ql


def started(args: list[str], cwd: Path, env: dict[str, str],
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qinglong", *args], cwd=cwd, env=env,
                          input=stdin, capture_output=True, text=True, timeout=60, check=False)


def test_a_forked_command_answers_as_a_started_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}
    env["QL_DATABASE_URL"] = f"sqlite:///{tmp_path / 'ql.db'}"
    env["TZ"] = "Asia/Shanghai"
    steps: list[tuple[list[str], str | None]] = [
        (["--version"], None),
        (["project", "list"], None),  # no database yet: exit 2, one line
        (["db", "migrate"], None),
        (["project", "create", "demo"], None),
        (["project", "create", "demo"], None),  # a conflict
        (["env", "set", "GREETING", "--project", "demo", "--stdin"], "hello\n"),
        (["env", "ls", "--project", "demo", "--json"], None),
        (["task", "publish", "--project", "demo", "--task", "t", "--shell", "echo hi"], None),
        (["task", "list", "--project", "demo"], None),
        (["no-such-command"], None),
        (["task", "publish", "--project", "demo"], None),  # usage error
    ]
    zygote = ql_process.shared_zygote()
    assert zygote is not None
    served = zygote.served
    fresh, fork_dir = tmp_path / "started", tmp_path / "forked"
    fresh.mkdir()
    fork_dir.mkdir()
    codes: list[int] = []
    for args, stdin in steps:
        real_env = {**env, "QL_DATABASE_URL": f"sqlite:///{fresh / 'ql.db'}"}
        fork_env = {**env, "QL_DATABASE_URL": f"sqlite:///{fork_dir / 'ql.db'}"}
        real = started(args, fresh, real_env, stdin)
        forked = run_ql(args, cwd=fork_dir, env=fork_env, input=stdin, timeout=60)
        assert forked.returncode == real.returncode, (args, real.stderr, forked.stderr)
        assert masked(forked.stdout, fork_dir) == masked(real.stdout, fresh), args
        assert masked(forked.stderr, fork_dir) == masked(real.stderr, fresh), args
        codes.append(forked.returncode)
    assert zygote.served == served + len(steps)  # each answer compared came from a fork
    assert codes.count(0) == 7 and codes.count(2) == 4, codes


def masked(text: str, directory: Path) -> str:
    """Output with its directory and instants (each run's own) taken out."""
    text = text.replace(str(directory), "DIR")
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?", "WHEN", text)


def test_a_command_past_its_timeout_is_killed_and_reported(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ql.db'}"
    assert run_ql(["db", "migrate", "--database-url", url], timeout=60).returncode == 0
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        run_ql(["serve", "--database-url", url, "--interval", "250ms"], cwd=tmp_path,
               timeout=1.5)
    assert timed_out.value.timeout == 1.5 and isinstance(timed_out.value.output, str)
    # a serve holds the file's lock while it runs: a second one serves only once the first
    # was killed (one that found it held would exit 4, "already running")
    log = tmp_path / "second.out"
    second = start_ql(["serve", "--database-url", url, "--interval", "250ms"], stdout=log,
                      cwd=tmp_path)
    wait_for(lambda: "serving" in log.read_text() or second.poll() is not None, 60,
             "the second serve to start or exit")
    assert second.poll() is None, log.read_text()
    second.terminate()
    assert second.wait(timeout=30) == 0, log.read_text()


def test_started_commands_run_at_once_and_stop_as_processes_do(tmp_path: Path) -> None:
    """Two forked `ql serve` run side by side (each with its own file), each is a process
    of its own that the test signals by pid, and each exits as a started one would."""
    servers = []
    for name in ("a", "b"):
        url = f"sqlite:///{tmp_path / name}.db"
        assert run_ql(["db", "migrate", "--database-url", url], timeout=60).returncode == 0
        log = tmp_path / f"{name}.out"
        servers.append((start_ql(["serve", "--database-url", url, "--interval", "250ms"],
                                 stdout=log, cwd=tmp_path, session=True), log))
    for server, log in servers:
        assert isinstance(server, ForkedQl)  # the path under test, not the fallback
        wait_for(lambda log=log: "serving" in log.read_text(), 60, f"{log.name} to serve")
    (a, a_log), (b, _) = servers
    assert a.pid != b.pid and a.poll() is None and b.poll() is None
    assert os.getsid(a.pid) == a.pid  # a session of its own, as start_new_session gives
    with pytest.raises(subprocess.TimeoutExpired):
        a.wait(timeout=0.2)
    a.terminate()  # ql serve stops cleanly on SIGTERM
    assert a.wait(timeout=30) == 0, a_log.read_text()
    b.kill()
    assert b.wait(timeout=30) == -signal.SIGKILL
    assert a.returncode == 0 and b.poll() == -signal.SIGKILL
    a.send_signal(signal.SIGTERM)  # an exited child is not signalled (its pid may be reused)


def test_a_refused_environment_variable_is_reported_as_a_started_command_reports_it(
        tmp_path: Path) -> None:
    """The URL comes from the child's own environment (QL_DATABASE_URL), not the server's: a
    bad one is refused with the same line and exit code as a started command's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}
    env["QL_DATABASE_URL"] = f"sqlite:///{tmp_path / 'not-a-dir' / 'x' / 'ql.db'}"
    forked = run_ql(["db", "migrate"], cwd=tmp_path, env=env, timeout=60)
    real = started(["db", "migrate"], tmp_path, env)
    assert forked.returncode == real.returncode == 2, (forked.stderr, real.stderr)
    assert forked.stderr == real.stderr and "not-a-dir" in forked.stderr
