"""Scripts end to end on SQLite (issue 22, item 1; docs/scripts.md).

The `ql` commands run in-process against one database file; a real `ql serve` runs the Runs:

- `ql script put|get|ls|history|diff|rm` keep every save as a revision named by its SHA-256,
  the same content again writing nothing;
- `ql task publish --script PATH` pins the script's content; `ql serve` runs exactly that
  content with the interpreter its extension names and the arguments given; a save moves the
  task onto the new content, and a Run admitted before the save still runs what it pinned;
- a binary or oversized file, a bad path, a stale `--if-revision`, a task of a missing script
  and an unknown extension are each one clear error line, writing nothing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.e2e.test_cli_errors import Result, assert_one_line_error, ql  # noqa: F401
from tests.support.cli_session import PROJECT, Cli, as_json, ok, serving, session
from tests.support.ql import wait_for

V1 = "import sys\nprint('v1', *sys.argv[1:])\n"
V2 = "import sys\nprint('v2', *sys.argv[1:])\n"


@pytest.fixture
def cli(ql: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:  # noqa: F811
    return session(ql, tmp_path, monkeypatch)


def test_every_save_is_a_revision_and_each_command_reads_them(cli: Cli, tmp_path: Path) -> None:
    Path("sign.py").write_text(V1)
    assert "saved demo/jd/sign.py revision 1" in ok(cli, "script", "put", *PROJECT,
                                                      "jd/sign.py", "-f", "sign.py")
    assert "unchanged at revision 1" in ok(cli, "script", "put", *PROJECT, "jd/sign.py",
                                            "-f", "sign.py")
    Path("sign.py").write_text(V2)
    saved = as_json(cli, "script", "put", *PROJECT, "jd/sign.py", "-f", "sign.py")
    assert (saved["revision"], saved["digest"]) == (2, hashlib.sha256(V2.encode()).hexdigest())
    assert ok(cli, "script", "get", *PROJECT, "jd/sign.py") == V2
    assert ok(cli, "script", "get", *PROJECT, "jd/sign.py", "--revision", "1") == V1
    listed = ok(cli, "script", "ls", *PROJECT).splitlines()
    assert listed[0].split()[:3] == ["PATH", "REV", "BYTES"] and listed[1].startswith("jd/sign.py")
    assert [r["revision"] for r in as_json(cli, "script", "history", *PROJECT, "jd/sign.py")] \
        == [2, 1]
    diff = ok(cli, "script", "diff", *PROJECT, "jd/sign.py")
    assert "-print('v1', *sys.argv[1:])" in diff and "+print('v2', *sys.argv[1:])" in diff
    assert "removed demo/jd/sign.py at revision 3" in ok(cli, "script", "rm", *PROJECT,
                                                          "jd/sign.py")
    assert as_json(cli, "script", "ls", *PROJECT) == []
    assert len(as_json(cli, "script", "ls", *PROJECT, "--all")) == 1


def test_bad_input_is_one_clear_line_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    Path("blob.py").write_bytes(b"\x7fELF\x00\x00")
    assert_one_line_error(cli("script", "put", *PROJECT, "x.py", "-f", "blob.py"), 2,
                          "binary", "NUL")
    Path("big.py").write_bytes(b"#" * (1024 * 1024 + 1))
    assert_one_line_error(cli("script", "put", *PROJECT, "big.py"), 2, "at most 1,048,576")
    assert_one_line_error(cli("script", "put", *PROJECT, "../up.py", "-f", "big.py"), 2,
                          "'..'")
    assert_one_line_error(cli("script", "put", *PROJECT, "none.py"), 2, "cannot read")
    Path("ok.py").write_text(V1)
    ok(cli, "script", "put", *PROJECT, "ok.py")
    assert_one_line_error(cli("script", "put", *PROJECT, "ok.py", "-f", "big.py",
                              "--if-revision", "0"), 2, "at most")
    Path("ok.py").write_text(V2)
    stale = cli("script", "put", *PROJECT, "ok.py", "--if-revision", "0")
    assert_one_line_error(stale, stale.code, "revision 1, not 0")
    assert stale.code != 0
    missing = cli("task", "publish", *PROJECT, "--task", "t", "--script", "no.py")
    assert missing.code != 0
    assert_one_line_error(missing, missing.code, "no.py")
    Path("tool.rb").write_text("puts 1\n")
    ok(cli, "script", "put", *PROJECT, "tool.rb")
    assert_one_line_error(cli("task", "publish", *PROJECT, "--task", "t", "--script", "tool.rb"),
                          2, "extension", "python3")
    assert [r["revision"] for r in as_json(cli, "script", "history", *PROJECT, "ok.py")] == [1]
    assert as_json(cli, "task", "list", *PROJECT) == []


def _log_of(cli: Cli, run_id: str) -> str | None:
    shown = as_json(cli, "run", "show", run_id)
    if shown["run"]["status"] not in ("succeeded", "failed"):
        return None
    assert shown["run"]["status"] == "succeeded", shown
    return ok(cli, "run", "logs", run_id)


@pytest.mark.slow
def test_serve_runs_exactly_the_content_each_run_pinned(
        cli: Cli, ql: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    Path("job.py").write_text(V1)
    ok(cli, "script", "put", *PROJECT, "tools/job.py", "-f", "job.py")
    # the script's own arguments come last, after --: the database is named by the environment
    monkeypatch.setenv("QL_DATABASE_URL", f"sqlite:///{tmp_path / 'ql.db'}")
    published = ok(ql, "task", "publish", *PROJECT, "--task", "job", "--script",
                    "tools/job.py", "--", "--day", "mon")
    assert "published task demo/job revision 1" in published
    shown = ok(cli, "task", "show", *PROJECT, "--task", "job")
    assert "python3 tools/job.py --day mon" in shown, shown
    first = as_json(cli, "task", "run", *PROJECT, "--task", "job")["id"]
    Path("job.py").write_text(V2)  # saved before the first Run ran: it still runs v1
    moved = as_json(cli, "script", "put", *PROJECT, "tools/job.py", "-f", "job.py")
    assert moved["tasks_updated"] == ["job"]
    second = as_json(cli, "task", "run", *PROJECT, "--task", "job")["id"]
    def both() -> tuple[str, str] | None:
        ended = _log_of(cli, first), _log_of(cli, second)
        return (ended[0], ended[1]) if ended[0] and ended[1] else None

    with serving(tmp_path):
        logs = wait_for(both, 60, "both Runs ended", interval=0.2)
    assert logs[0].strip() == "v1 --day mon" and logs[1].strip() == "v2 --day mon", logs
