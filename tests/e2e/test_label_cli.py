"""`ql task label` and `ql trigger label` as a user drives them (in-process, SQLite): labels
shown, set (the whole set, publishing nothing) and cleared, in text and as JSON; a bad label or
an unknown task refused in one line, changing nothing; the change in the audit log."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.test_cli_errors import Result, assert_one_line_error, ql  # noqa: F401


@pytest.fixture
def db(ql: Callable[..., Result], tmp_path: Path,  # noqa: F811
       monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    url = f"sqlite:///{tmp_path / 'ql.db'}"

    def run(*argv: str) -> Result:
        return ql(*argv, "--database-url", url)

    for argv in (("db", "migrate"), ("project", "create", "demo"),
                 ("task", "publish", "--project", "demo", "--task", "job", "--shell", "true"),
                 ("trigger", "publish", "--project", "demo", "--trigger", "yearly", "--task",
                  "job", "--cron", "0 0 1 1 *", "--timezone", "UTC")):
        assert run(*argv).code == 0, argv
    return run


def _ok(result: Result) -> str:
    assert result.code == 0, result.err
    return result.out


def test_labels_are_shown_set_and_cleared(db: Callable[..., Result]) -> None:
    task = ("--project", "demo", "--task", "job")
    assert _ok(db("task", "label", *task)) == "task demo/job: no labels\n"
    assert _ok(db("task", "label", *task, "--set", "team:payments", "--set", "nightly")) == (
        "task demo/job: nightly team:payments\n")
    shown = json.loads(_ok(db("task", "show", *task, "--json")))
    assert (shown["labels"], shown["revision"]) == (["nightly", "team:payments"], 1)
    assert json.loads(_ok(db("task", "label", *task, "--json")))["labels"] == [
        "nightly", "team:payments"]
    assert _ok(db("task", "label", *task, "--clear")) == "task demo/job: no labels\n"
    trigger = ("--project", "demo", "--trigger", "yearly")
    assert json.loads(_ok(db("trigger", "label", *trigger, "--set", "eu", "--json"))) == {
        "project": "demo", "kind": "trigger", "id": "yearly", "labels": ["eu"]}
    listed = json.loads(_ok(db("trigger", "list", "--json")))
    assert [t["labels"] for t in listed] == [["eu"]]
    assert json.loads(_ok(db("trigger", "list", "--label", "eu", "--json")))[0]["trigger"] == (
        "yearly")
    assert json.loads(_ok(db("trigger", "list", "--label", "us", "--json"))) == []
    db("task", "label", *task, "--set", "nightly")
    assert [t["task"] for t in json.loads(_ok(db("task", "list", "--project", "demo",
                                                 "--label", "nightly", "--json")))] == ["job"]
    assert_one_line_error(db("task", "list", "--project", "demo", "--label", "Not One"), 2,
                          "label")


@pytest.mark.parametrize(("argv", "needle"), [
    (("task", "label", "--project", "demo", "--task", "job", "--set", "Bad One"), "labels[0]"),
    (("task", "label", "--project", "demo", "--task", "job", "--set", "a", "--clear"),
     "not both"),
    (("task", "label", "--project", "demo", "--task", "ghost", "--set", "a"), "ghost"),
    (("trigger", "label", "--project", "demo", "--trigger", "ghost"), "ghost")])
def test_bad_labels_are_refused_in_one_line_and_change_nothing(
        db: Callable[..., Result], argv: tuple[str, ...], needle: str) -> None:
    assert_one_line_error(db(*argv), 2, needle)
    assert _ok(db("task", "label", "--project", "demo", "--task", "job")) == (
        "task demo/job: no labels\n")
