"""`run_ql` (tests/support/ql_process.py) answers as a real `python -m qinglong` does: the
same exit code, standard output and error for the same argv, environment, working directory
and standard input; a timeout is a timeout; commands run at once stay concurrent."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ql_process
from tests.support.ql_process import run_ql


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
    assert "serving" in str(timed_out.value.output)
    # the server took the file's lock; a killed one let it go, so a second serve can start
    with pytest.raises(subprocess.TimeoutExpired):
        run_ql(["serve", "--database-url", url, "--interval", "250ms"], cwd=tmp_path,
               timeout=1.5)


def test_a_command_asked_for_while_the_server_is_busy_starts_for_real(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commands a test runs at once stay concurrent: the second does not wait for the first."""
    url = f"sqlite:///{tmp_path / 'ql.db'}"
    assert run_ql(["db", "migrate", "--database-url", url], timeout=60).returncode == 0
    real_starts: list[list[str]] = []
    start = subprocess.run

    def counted(command: list[str], **options: object) -> object:
        real_starts.append(command)
        return start(command, **options)  # type: ignore[call-overload]

    monkeypatch.setattr(ql_process.subprocess, "run", counted)
    zygote = ql_process.shared_zygote()
    assert zygote is not None
    with zygote.lock:  # as while another thread's command runs
        busy = run_ql(["project", "create", "a", "--database-url", url], timeout=60)
    idle = run_ql(["project", "create", "b", "--database-url", url], timeout=60)
    assert (busy.returncode, idle.returncode) == (0, 0), busy.stderr + idle.stderr
    assert real_starts == [[sys.executable, "-m", "qinglong", "project", "create", "a",
                            "--database-url", url]]
    listed = run_ql(["project", "list", "--database-url", url], timeout=60).stdout
    assert {"a", "b"} <= set(listed.split())
