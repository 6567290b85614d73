"""The server's side of the panel findings (issue 18), without a browser: one duration parser
for the CLI and the API (a pause until ``10m``), the working-directory check the CLI and the
API share, and the Runs filter reading ``project/trigger``. tests/browser/test_panel_findings.py
drives the same through the panel."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from qinglong.cli import params
from qinglong.domain.durations import parse_duration_ms
from qinglong.errors import InvalidInput
from qinglong.service.working_directory import check_directory_here
from qinglong.testing.clock import FakeClock
from qinglong.web.definitions import UNTIL_RULE, _until
from qinglong.web.runs import _scoped

NOW_MS = 1_800_000_000_000


def until(value: str | int | None) -> int | None:
    return _until(SimpleNamespace(clock=FakeClock(NOW_MS)), value)  # type: ignore[arg-type]


def test_the_cli_and_the_api_read_durations_with_one_parser() -> None:
    assert params.parse_duration_ms is parse_duration_ms
    assert [parse_duration_ms(t) for t in ("1h", "10m", "1h30m", "1.5h", "500ms", "1m 30s")] == [
        3_600_000, 600_000, 5_400_000, 5_400_000, 500, 90_000]
    for text in ("90", "1m1h", "1x", ""):
        with pytest.raises(ValueError, match="is not a duration"):
            parse_duration_ms(text)


def test_a_pause_ends_after_a_duration_from_now_or_at_an_instant() -> None:
    assert until("10m") == NOW_MS + 600_000
    assert until("1h") == NOW_MS + 3_600_000  # never one second
    assert until("2027-01-15T08:00:00+08:00") == int(
        datetime(2027, 1, 15, 0, tzinfo=UTC).timestamp()) * 1000
    assert until(str(NOW_MS + 5)) == NOW_MS + 5 and until(NOW_MS) == NOW_MS
    assert until(None) is None
    for text in ("10x", "soon", "tomorrow"):
        with pytest.raises(InvalidInput) as caught:
            until(text)
        assert (caught.value.field, caught.value.rule) == ("until", UNTIL_RULE)
    with pytest.raises(InvalidInput, match="offset"):
        until("2027-01-15T08:00:00")


def test_a_working_directory_must_exist_here_only_where_commands_run_here(
        tmp_path: Path) -> None:
    missing = str(tmp_path / "gone")
    with pytest.raises(InvalidInput) as caught:
        check_directory_here(missing, True)
    assert caught.value.field == "working-directory"
    assert caught.value.rule == (f"directory {missing!r} does not exist on this host "
                                 "(commands of the SQLite profiles run here)")
    check_directory_here(str(tmp_path), True)
    check_directory_here(missing, False)  # the workers' hosts: not visible from here
    check_directory_here(None, True)
    check_directory_here("relative", True)  # the task's own rule refuses it


def test_the_runs_filter_reads_project_slash_trigger() -> None:
    assert _scoped(None, "demo/every-sec", "trigger") == ("demo", "every-sec")
    assert _scoped("demo", "demo / every-sec", "trigger") == ("demo", "every-sec")
    assert _scoped("demo", "every-sec", "trigger") == ("demo", "every-sec")
    assert _scoped(None, None, "task") == (None, None)
    with pytest.raises(InvalidInput) as caught:
        _scoped("other", "demo/every-sec", "trigger")
    assert caught.value.field == "trigger" and "'demo'" in caught.value.rule
    with pytest.raises(InvalidInput) as caught:
        _scoped(None, "Bad Project/x", "trigger")
    assert caught.value.field == "trigger"
