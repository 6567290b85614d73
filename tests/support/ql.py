"""Drive the `ql` command as a user would: separate processes against a real database
(forked from a warm one where that stands for a fresh start: tests/support/ql_process.py)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.ql_process import ForkedQl, ql_command, run_ql, start_ql


class Ql:
    def __init__(self, database_url: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.database_url = database_url
        self.cwd = cwd
        self.env = {**os.environ, "QL_DATABASE_URL": database_url, **(env or {})}

    def command(self, *args: str) -> list[str]:
        return ql_command(args)

    def run(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        done = run_ql(args, cwd=self.cwd, env=self.env, timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"ql {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)

    def start(self, *args: str, stdout: Path | None = None) -> ForkedQl | subprocess.Popen[str]:
        """`ql ARGS` running on, its output and errors to ``stdout`` (None: discarded)."""
        return start_ql(args, stdout=stdout, env=self.env, cwd=self.cwd)


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def seconds(values: Sequence[int]) -> list[int]:
    return sorted(v // 1000 for v in values)
