"""`ql limits` as a user drives it (in-process, SQLite): the global limit shown, set and
removed, in text and as JSON (the service's LimitsView), and bad input refused in one line."""

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

    assert run("db", "migrate").code == 0
    return run


def _ok(result: Result) -> str:
    assert result.code == 0, result.err
    return result.out


def test_the_global_limit_is_shown_set_and_removed(db: Callable[..., Result]) -> None:
    assert _ok(db("limits", "show")) == "global  none (no cap)\n"
    assert json.loads(_ok(db("limits", "show", "--json"))) == {"global": None}
    assert json.loads(_ok(db("limits", "set", "--global", "7", "--json"))) == {"global": 7}
    assert _ok(db("limits", "show")) == "global  7\n"
    assert _ok(db("limits", "set", "--no-global")) == "global  none (no cap)\n"
    assert json.loads(_ok(db("limits", "show", "--json"))) == {"global": None}


@pytest.mark.parametrize(("argv", "needle"), [
    (("limits", "set"), "exactly one of --global N and --no-global"),
    (("limits", "set", "--global", "0"), "--global"),
    (("limits", "set", "--global", "3", "--no-global"), "exactly one of")])
def test_bad_limits_are_refused_in_one_line_and_change_nothing(
        db: Callable[..., Result], argv: tuple[str, ...], needle: str) -> None:
    assert_one_line_error(db(*argv), 2, needle)
    assert json.loads(_ok(db("limits", "show", "--json"))) == {"global": None}
