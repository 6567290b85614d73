"""End-to-end tests of the everyday commands a new user reached for first, and of the rough
edges they hit: partial republish, task history and diff, enable/disable/delete, unarchive,
listings across projects, run filters, JSON errors, write-only environment values, durations,
foreign SQLite files. The CLI runs in-process (see test_cli_errors.py)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.test_cli_errors import Result, assert_one_line_error, dump, ql  # noqa: F401

pytestmark = pytest.mark.usefixtures("_no_ambient_url")


@pytest.fixture
def _no_ambient_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def db(ql: Callable[..., Result], tmp_path: Path) -> Callable[..., Result]:  # noqa: F811
    """``ql`` bound to a fresh migrated database with project demo and task hello."""
    url = f"sqlite:///{tmp_path / 'ql.db'}"

    def run(*argv: str) -> Result:
        return ql(*argv, "--database-url", url)

    for step in (("db", "migrate"), ("project", "create", "demo"),
                 ("task", "publish", "--project", "demo", "--task", "hello", "--shell",
                  "echo hi", "--env", "TOKEN=s3cr3t-value", "--env", "MODE=fast",
                  "--timeout", "30s")):
        done = run(*step)
        assert done.code == 0, done.err
    return run


def as_json(result: Result) -> object:
    assert result.code == 0, result.err
    return json.loads(result.out)


def task_json(db: Callable[..., Result], task: str = "hello") -> dict[str, object]:
    shown = as_json(db("task", "show", "--project", "demo", "--task", task, "--json"))
    assert isinstance(shown, dict)
    return shown


# --- partial republish -------------------------------------------------------------------


def test_publishing_only_a_timeout_keeps_everything_else(db: Callable[..., Result]) -> None:
    result = db("task", "publish", "--project", "demo", "--task", "hello", "--timeout", "1h30m")
    assert result.code == 0, result.err
    assert result.out.startswith("published task demo/hello revision 2 ")
    shown = task_json(db)
    assert shown["timeout_ms"] == 90 * 60_000
    assert shown["command"] == {"kind": "shell", "shell": "/bin/sh", "command": "echo hi"}
    assert shown["environment"] == ["MODE", "TOKEN"]  # a forgotten --env is not dropped


def test_env_entries_are_set_unset_and_cleared(db: Callable[..., Result]) -> None:
    base = ("task", "publish", "--project", "demo", "--task", "hello")
    assert db(*base, "--env", "MODE=slow", "--env", "EXTRA=1").code == 0
    assert task_json(db)["environment"] == ["EXTRA", "MODE", "TOKEN"]
    assert db(*base, "--unset-env", "TOKEN").code == 0
    assert task_json(db)["environment"] == ["EXTRA", "MODE"]
    assert db(*base, "--clear-env", "--env", "ONLY=1").code == 0
    assert task_json(db)["environment"] == ["ONLY"]
    assert_one_line_error(db(*base, "--unset-env", "NOPE"), 2, "--env", "'NOPE' is not set")


def test_a_new_shell_command_keeps_the_tasks_interpreter(
        db: Callable[..., Result], ql: Callable[..., Result], tmp_path: Path) -> None:  # noqa: F811
    base = ("task", "publish", "--project", "demo", "--task", "hello")
    assert db(*base, "--shell", "echo one", "--bash").code == 0
    assert db(*base, "--shell", "echo two").code == 0  # no --bash: still bash
    assert task_json(db)["command"] == {"kind": "shell", "shell": "/bin/bash", "command": "echo two"}
    assert db(*base, "--timeout", "5m").code == 0
    assert task_json(db)["command"]["shell"] == "/bin/bash"  # type: ignore[index]
    assert db(*base, "--shell", "echo three", "--sh").code == 0  # the way back to /bin/sh
    assert task_json(db)["command"] == {"kind": "shell", "shell": "/bin/sh", "command": "echo three"}
    url = f"sqlite:///{tmp_path / 'ql.db'}"
    assert ql(*base, "--database-url", url, "--argv", "/bin/echo", "x").code == 0
    assert db(*base, "--shell", "echo four").code == 0  # from argv: the default, /bin/sh
    assert task_json(db)["command"]["shell"] == "/bin/sh"  # type: ignore[index]
    assert_one_line_error(db(*base, "--shell", "true", "--bash", "--sh"), 2, "--bash", "--sh")
    assert_one_line_error(db(*base, "--sh"), 2, "--sh", "--shell")


def test_a_new_task_still_needs_a_command(db: Callable[..., Result]) -> None:
    assert_one_line_error(
        db("task", "publish", "--project", "demo", "--task", "fresh", "--timeout", "10s"),
        2, "--shell/--argv", "required for a new task")


# --- history, diff, enable, disable, delete --------------------------------------------------


def test_task_show_and_diff_tell_what_changed_without_env_values(
        db: Callable[..., Result]) -> None:
    base = ("task", "publish", "--project", "demo", "--task", "hello")
    assert db(*base, "--shell", "echo changed", "--env", "TOKEN=new-secret").code == 0
    shown = task_json(db)
    assert [h["revision"] for h in shown["history"]] == [1, 2]  # type: ignore[union-attr, index]
    changes = shown["history"][1]["changes"]  # type: ignore[index]
    assert {c["field"] for c in changes} == {"command", "environment.TOKEN"}
    diff = as_json(db("task", "diff", "--project", "demo", "--task", "hello", "--json"))
    assert diff["changes"] == changes  # type: ignore[index]
    text = db("task", "show", "--project", "demo", "--task", "hello")
    assert text.code == 0 and "history:" in text.out
    assert "command: echo hi -> echo changed; env.TOKEN: (set) -> (changed)" in text.out
    for output in (json.dumps(shown), json.dumps(diff), text.out):
        assert "s3cr3t-value" not in output and "new-secret" not in output
    assert_one_line_error(db("task", "diff", "--project", "demo", "--task", "hello",
                             "--from", "9"), 2, "--from", "revisions 1 to 2")


def test_env_values_are_write_only_in_every_listing(db: Callable[..., Result]) -> None:
    for argv in (("task", "list", "--project", "demo", "--json"),
                 ("task", "list", "--project", "demo"),
                 ("task", "show", "--project", "demo", "--task", "hello", "--json")):
        result = db(*argv)
        assert result.code == 0, result.err
        assert "s3cr3t-value" not in result.out and "TOKEN" in result.out


def test_disable_enable_and_delete_a_task(db: Callable[..., Result]) -> None:
    task = ("--project", "demo", "--task", "hello")
    assert db("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
              "--cron", "0 0 * * *", "--timezone", "UTC").code == 0
    assert db("task", "disable", *task).out == "disabled task demo/hello (revision 2)\n"
    assert task_json(db)["enabled"] is False
    assert db("task", "disable", *task).out == "task demo/hello already disabled\n"
    assert db("task", "enable", *task).out == "enabled task demo/hello (revision 3)\n"
    assert_one_line_error(db("task", "delete", *task), 2, "t1", "delete those first")
    assert db("trigger", "delete", "--project", "demo", "--trigger", "t1").code == 0
    assert db("task", "delete", *task).out == "deleted task demo/hello\n"
    assert as_json(db("task", "list", "--project", "demo", "--json")) == []
    listed = as_json(db("task", "list", "--project", "demo", "--all", "--json"))
    assert [(t["task"], t["deleted"]) for t in listed] == [("hello", True)]  # type: ignore[index]
    assert as_json(db("trigger", "list", "--project", "demo", "--json")) == []
    restored = db("task", "publish", *task, "--shell", "echo back")
    assert "(restored)" in restored.out


def test_a_deleted_task_is_restored_enabled(db: Callable[..., Result]) -> None:
    task = ("--project", "demo", "--task", "hello")
    assert db("task", "delete", *task).code == 0
    restored = db("task", "publish", *task, "--shell", "echo back")
    assert restored.code == 0 and "(restored)" in restored.out
    shown = task_json(db)
    assert (shown["enabled"], shown["deleted"]) == (True, False)
    assert db("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
              "--cron", "0 0 * * *", "--timezone", "UTC").code == 0


def test_a_bare_publish_restores_a_deleted_task_enabled(
        db: Callable[..., Result]) -> None:
    task = ("--project", "demo", "--task", "hello")
    assert db("task", "disable", *task).code == 0
    assert db("task", "delete", *task).code == 0
    assert "(restored)" in db("task", "publish", *task).out
    shown = task_json(db)
    assert (shown["enabled"], shown["revision"]) == (True, 3)
    assert shown["command"] == {"kind": "shell", "shell": "/bin/sh", "command": "echo hi"}


def test_a_deleted_task_published_disabled_stays_disabled(db: Callable[..., Result]) -> None:
    task = ("--project", "demo", "--task", "hello")
    assert db("task", "delete", *task).code == 0
    restored = db("task", "publish", *task, "--disabled")
    assert restored.out == "restored task demo/hello at revision 2\n"
    shown = task_json(db)
    assert (shown["enabled"], shown["deleted"]) == (False, False)
    assert db("task", "enable", *task).out == "enabled task demo/hello (revision 3)\n"


# --- projects and triggers ---------------------------------------------------------------------


def test_unarchive_and_triggers_across_projects(db: Callable[..., Result]) -> None:
    assert db("project", "create", "other").code == 0
    assert db("task", "publish", "--project", "other", "--task", "x", "--shell", "true").code == 0
    for project, trigger, task in (("demo", "a", "hello"), ("other", "b", "x")):
        assert db("trigger", "publish", "--project", project, "--trigger", trigger, "--task", task,
                  "--cron", "0 9 * * *", "--timezone", "Asia/Shanghai").code == 0
    assert db("project", "archive", "other").code == 0
    rows = as_json(db("trigger", "list", "--json"))
    assert [(r["project"], r["trigger"], r["state"]) for r in rows] == [  # type: ignore[index]
        ("demo", "a", "firing"), ("other", "b", "archived")]
    assert db("project", "unarchive", "other").out == "unarchived project other\n"
    assert_one_line_error(db("project", "unarchive", "other"), 2, "not archived")
    table = db("trigger", "list")
    assert table.code == 0 and "other/b" in table.out
    # next fire shown in the trigger's own zone with UTC after it
    assert "09:00:00+08:00 (01:00:00Z)" in table.out


def test_a_trigger_keeps_its_state_when_republished(db: Callable[..., Result]) -> None:
    base = ("trigger", "publish", "--project", "demo", "--trigger", "t1")
    assert db(*base, "--task", "hello", "--cron", "0 0 * * *", "--timezone", "UTC").code == 0
    assert db("trigger", "disable", "--project", "demo", "--trigger", "t1").code == 0
    assert "(disabled;" in db(*base, "--cron", "0 1 * * *").out


# --- runs -------------------------------------------------------------------------------------


def test_run_list_filters_by_task_and_time(db: Callable[..., Result], tmp_path: Path) -> None:
    from tests.e2e.test_cli_errors import _admit_runs

    assert db("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
              "--cron", "* * * * * *", "--timezone", "UTC").code == 0
    _admit_runs(tmp_path / "ql.db", "t1", ["abcdef01-0000-4000-8000-00000000000a",
                                           "abcdef01-0000-4000-8000-00000000000b"])
    rows = as_json(db("run", "list", "--task", "hello", "--json"))
    assert len(rows) == 2  # type: ignore[arg-type]
    assert {"duration_ms", "exit_code", "task"} <= set(rows[0])  # type: ignore[index]
    assert as_json(db("run", "list", "--task", "other", "--json")) == []
    assert as_json(db("run", "list", "--since", "2099-01-01T00:00:00Z", "--json")) == []
    assert len(as_json(db("run", "list", "--since", "3650d", "--json"))) == 2  # type: ignore[arg-type]
    table = db("run", "list")
    assert table.code == 0 and "EXIT" in table.out and "DURATION" in table.out
    shown = db("run", "show", "abcdef01-0000-4000-8000-00000000000a")
    assert '"from_status": "created"' in shown.out  # payloads are JSON, not Python dicts
    assert_one_line_error(db("run", "list", "--since", "yesterday"), 2, "--since")


# --- errors as JSON, durations, foreign files -------------------------------------------------


def test_json_errors_are_one_problem_object(db: Callable[..., Result]) -> None:
    result = db("task", "list", "--project", "nope", "--json")
    assert result.code == 2 and result.out == ""
    problem = json.loads(result.err)["error"]
    assert (problem["code"], problem["status"]) == ("QL_NOT_FOUND", 404)
    assert "nope" in problem["detail"]
    bad = db("task", "publish", "--project", "demo", "--task", "x", "--shell", "", "--json")
    problem = json.loads(bad.err)["error"]
    assert (problem["code"], problem["field"]) == ("QL_INVALID_INPUT", "--shell")
    usage = db("task", "list", "--bogus", "--json")
    assert usage.code == 2 and json.loads(usage.err)["error"]["code"] == "QL_USAGE"


def test_db_migrate_refuses_a_foreign_sqlite_file(ql: Callable[..., Result],  # noqa: F811
                                                  tmp_path: Path) -> None:
    other = tmp_path / "app.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    before = dump(other)
    result = ql("db", "migrate", "--database-url", f"sqlite:///{other}")
    assert_one_line_error(result, 3, "not a qinglong database", "customers")
    assert dump(other) == before


# --- help texts ---------------------------------------------------------------------------------


def test_help_texts_say_what_the_commands_do(ql: Callable[..., Result]) -> None:  # noqa: F811
    def help_of(*argv: str) -> str:
        result = ql(*argv, "--help")
        assert result.code == 0, result.err
        return " ".join(result.out.split())  # click wraps lines

    serve = help_of("serve")
    assert "the rest is dropped" not in serve  # the cap keeps the head and the tail
    assert "first and the last half of the output are kept" in serve
    publish = help_of("task", "publish")
    assert "--sh " in publish and "keeps its current interpreter" in publish
    assert "restores it, enabled unless --disabled" in publish
    unarchive = help_of("project", "unarchive")
    assert "are not run" not in unarchive and "fire_once runs one Run" in unarchive
