"""What the end-to-end CLI tests on one SQLite file share (no tests here): `ql ARGS` run
in-process on `tmp_path/ql.db` (migrated, with the project `demo`), its answers read as text
or JSON, and a real `ql serve` on the same file, stopped cleanly on the way out."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli_errors import Result
from tests.support.ql import Ql

PROJECT = ("--project", "demo")
Cli = Callable[..., Result]


def session(ql: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    """`ql ARGS` in-process on tmp_path/ql.db, migrated, with the project `demo` (one Python
    start-up per command would make the tests slow)."""
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'ql.db'}"

    def run(*argv: str) -> Result:
        return ql(*argv, "--database-url", url)

    for step in (("db", "migrate"), ("project", "create", "demo")):
        ok(run, *step)
    return run


def ok(cli: Cli, *argv: str) -> str:
    """The output of a command that must succeed."""
    done = cli(*argv)
    assert done.code == 0, f"ql {' '.join(argv)} exited {done.code}: {done.err}"
    return done.out


def as_json(cli: Cli, *argv: str) -> Any:
    """The JSON answer (``--json``) of a command that must succeed."""
    return json.loads(ok(cli, *argv, "--json"))


@contextmanager
def serving(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A real `ql serve` (standalone, SQLite) on tmp_path/ql.db, stopped cleanly after."""
    q = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path)
    server = q.start("serve", "--interval", "250ms", stdout=tmp_path / "serve.out")
    try:
        yield server
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert server.returncode == 0, (tmp_path / "serve.out").read_text()
