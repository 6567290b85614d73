"""Dependencies end to end on SQLite (issue 22, item 4; docs/dependencies.md), without a
network: `ql deps add` a locally built wheel and a local npm tarball (pip is told where to
look by the project's environment: PIP_NO_INDEX, PIP_FIND_LINKS), `ql deps install` admits a
Run a real `ql serve` executes into <database>.deps (its log shows pip and npm), the
project's Python and Node scripts import the packages; a set that cannot be installed fails
its install Run with pip's words in the log and the scripts keep running in the previous
set's environment until the set changes; bad specifiers are one line, exit 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli_errors import Result, assert_one_line_error, ql  # noqa: F401
from tests.support.cli_session import PROJECT, Cli, as_json, ok, serving, session
from tests.support.deps_packages import npm_tarball, wheel
from tests.support.ql import wait_for


@pytest.fixture
def cli(ql: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:  # noqa: F811
    return session(ql, tmp_path, monkeypatch)


def _ended(cli: Cli, run_id: str) -> dict[str, Any] | None:
    shown: dict[str, Any] = as_json(cli, "run", "show", run_id)
    return shown if shown["run"]["status"] in ("succeeded", "failed") else None


def _run(cli: Cli, *argv: str, key: str = "run") -> tuple[str, str]:
    """Admit a Run, wait for its end; its status and log."""
    admitted = as_json(cli, *argv)
    run_id = admitted[key] if key in admitted and isinstance(admitted[key], str) \
        else admitted["id"]
    shown = wait_for(lambda: _ended(cli, run_id), 180, "the Run to end", interval=0.2)
    return shown["run"]["status"], ok(cli, "run", "logs", run_id)


def test_bad_specifiers_are_one_line_and_write_nothing(cli: Cli) -> None:
    for argv, field in ((("--python", "requests; rm -rf /"), "python"),
                        (("--python", "--index-url=http://x"), "python"),
                        (("--node", "axios@1 && id"), "node"), ((), "deps")):
        assert_one_line_error(cli("deps", "add", *PROJECT, *argv), 2, field)
    assert as_json(cli, "deps", "ls", *PROJECT) == []
    assert_one_line_error(cli("deps", "install", *PROJECT), 2, "dependency set", "demo")


@pytest.mark.slow
def test_serve_installs_the_set_and_the_scripts_run_in_it(cli: Cli, tmp_path: Path) -> None:
    wheels = wheel(tmp_path / "wheels").parent
    tgz = npm_tarball(tmp_path / "npm")
    ok(cli, "env", "set", *PROJECT, "PIP_NO_INDEX", "--value", "1")
    ok(cli, "env", "set", *PROJECT, "PIP_FIND_LINKS", "--value", str(wheels))
    added = as_json(cli, "deps", "add", *PROJECT, "--python", "QLTiny==1.*",
                  "--node", f"qltinyjs@file:{tgz}")
    assert added["python"] == ["qltiny==1.*"] and added["revision"] == 1
    (tmp_path / "a.py").write_text("import qltiny, sys\nprint('py', qltiny.VALUE)\n")
    (tmp_path / "b.js").write_text("console.log('js', require('qltinyjs'))\n")
    for path, task in (("a.py", "py"), ("b.js", "js")):
        ok(cli, "script", "put", *PROJECT, path, "--file", str(tmp_path / path))
        ok(cli, "task", "publish", *PROJECT, "--task", task, "--script", path)
    with serving(tmp_path):
        status, log = _run(cli, "deps", "install", *PROJECT)
        assert status == "succeeded", log
        assert "Successfully installed qltiny-1.0" in log and "added 1 package" in log, log
        cache = tmp_path / "ql.db.deps"
        assert (cache / "python" / added["digest"]).is_symlink()
        assert (cache / "node" / added["digest"]).is_symlink()
        status, log = _run(cli, "task", "run", *PROJECT, "--task", "py")
        assert (status, log) == ("succeeded", "py tiny\n"), log
        status, log = _run(cli, "task", "run", *PROJECT, "--task", "js")
        assert (status, log) == ("succeeded", "js tiny js\n"), log
        # a set that cannot be installed: its install fails with pip's words ...
        ok(cli, "deps", "add", *PROJECT, "--python", "no-such-package==9")
        status, log = _run(cli, "deps", "install", *PROJECT)
        assert status == "failed", log
        assert "No matching distribution found for no-such-package" in log, log
        assert "DEPS_INSTALL_FAILED" in log, log
        # ... and the scripts keep running in the previous set's environment
        status, log = _run(cli, "task", "run", *PROJECT, "--task", "py")
        assert status == "succeeded" and log.endswith("py tiny\n"), log
        assert "running in the environment of the earlier set r1" in log, log
        # the set goes back: the first environment serves again, nothing reinstalled
        ok(cli, "deps", "rm", *PROJECT, "--python", "no-such-package")
        status, log = _run(cli, "task", "run", *PROJECT, "--task", "py")
        assert (status, log) == ("succeeded", "py tiny\n"), log
    history = as_json(cli, "deps", "history", *PROJECT)
    assert [h["revision"] for h in history] == [3, 2, 1]
    assert history[0]["digest"] == history[2]["digest"] == added["digest"]
    listed = {t["task"]: t for t in as_json(cli, "task", "list", *PROJECT)}
    assert listed["deps-install"]["command"]["kind"] == "deps"
