"""The retention setting of `ql control` and `ql serve` (docs/retention.md): 0 keeps for ever,
1-3650 days, default 30; anything else is refused with one line naming the option, before a
database is opened, never with a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from qinglong.domain.retention import (
    DEFAULT_RETENTION_DAYS,
    check_retention_days,
    retention_ms,
)
from qinglong.errors import InvalidConfig
from qinglong.profiles.cluster_config import load_control_settings
from qinglong.profiles.local import LocalServeConfig
from tests.e2e.test_cli_errors import Result, _call, assert_one_line_error

CONTROL = ("control", "--database-url", "postgresql://ql_runtime@127.0.0.1:1/ql",
           "--owner-id", "c1")


def test_days_bounds_and_keep_for_ever() -> None:
    assert DEFAULT_RETENTION_DAYS == 30
    assert retention_ms(0) is None
    assert retention_ms(1) == 86_400_000
    assert check_retention_days(3650) == 3650
    for days in (-1, 3651):
        with pytest.raises(InvalidConfig, match="keep for ever"):
            check_retention_days(days)


@pytest.mark.parametrize("days", [-1, 3651])
def test_control_refuses_a_bad_retention_before_opening_postgres(days: int) -> None:
    base = {"database_url": "postgresql://ql_runtime@192.0.2.1:1/none", "owner_id": "c1"}
    with pytest.raises(InvalidConfig) as refused:
        load_control_settings({**base, "retention_days": days})
    assert refused.value.field == "--retention-days"
    assert load_control_settings(base).retention_days == 30
    assert load_control_settings({**base, "retention_days": 0}).retention_days == 0


def test_serve_config_refuses_a_bad_retention(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfig, match="retention-days"):
        LocalServeConfig(database_path=tmp_path / "q.db", retention_days=-3).validated()
    assert LocalServeConfig(database_path=tmp_path / "q.db").validated().retention_days == 30


def _ql(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    capsys.readouterr()
    code, crash = _call(argv)
    out, err = capsys.readouterr()
    return Result(code=code, out=out, err=err + crash)


@pytest.mark.parametrize("value", ["-1", "3651", "soon"])
def test_the_flags_refuse_bad_values_with_one_line(capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path, value: str) -> None:
    control = _ql(capsys, *CONTROL, "--retention-days", value)
    assert_one_line_error(control, 2, "--retention-days")
    db = tmp_path / "q.db"
    serve = _ql(capsys, "serve", "--database-url", f"sqlite:///{db}", "--duration", "50ms",
                "--retention-days", value)
    assert_one_line_error(serve, 2, "--retention-days")
    assert not db.exists()


def test_the_flags_are_documented(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("control", "serve"):
        result = _ql(capsys, command, "--help")
        assert result.code == 0
        assert "--retention-days" in result.out and "docs/retention.md" in result.out.replace("\n", "")
