"""Issue 18, items 7 and 8 (parts): `ql import crontab` says what it did with every variable
line and with the timeout, and `ql task diff` shows values as the rest of the CLI does.

- A crontab has no timeout, so an imported job gets none (the longest a task may have,
  365d) unless `--timeout` says otherwise; either way the output says which.
- `MAILTO` (and cron's other mail settings) configure cron, not the job: they are not made
  environment entries, and the output says so. Other `NAME=value` lines become plain
  environment entries (never `{from_env: ...}`), and the output names each with the jobs it
  reaches; `SHELL=` and `CRON_TZ=` are reported too.
- `ql task diff` and the history of `ql task show` print durations, retry policies and
  commands as `ql task show` does, never a Python repr.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.test_cli_errors import Result, ql  # noqa: F401

Ql = Callable[..., Result]

CRONTAB = """\
# from an old box
MAILTO=ops@example.com
PATH=/usr/local/bin:/usr/bin:/bin
SHELL=/bin/bash
0 3 * * * backup --all
LANG=C.UTF-8
*/5 * * * * poll
CRON_TZ=Asia/Shanghai
@daily report
"""
NOTES = [
    ("note: crontab:2: MAILTO: not imported: it tells cron where to mail a job's output; "
     "qinglong keeps each Run's output (ql run logs) and notifies with ql notify"),
    "note: crontab:3: PATH: an environment entry of the 3 jobs below it",
    "note: crontab:4: SHELL=/bin/bash: the 3 jobs below it run with /bin/bash",
    "note: crontab:6: LANG: an environment entry of the 2 jobs below it",
    ("note: crontab:8: CRON_TZ=Asia/Shanghai: the schedule of the 1 job below it is in "
     "Asia/Shanghai"),
]
NO_TIMEOUT = ("note: crontab: cron has no timeout, so no job gets one (timeout 365d, the "
              "longest a task may have); --timeout DURATION gives every job one")


def ok(result: Result) -> Result:
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    return result


@pytest.fixture
def db(ql: Ql, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Ql:  # noqa: F811
    monkeypatch.setenv("QL_DATABASE_URL", f"sqlite:///{tmp_path / 'ql.db'}")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "crontab").write_text(CRONTAB)
    ok(ql("db", "migrate"))
    return ql


IMPORT = ("import", "crontab", "crontab", "--project", "legacy", "--timezone", "UTC")


def test_import_says_what_it_did_with_each_variable_line_and_the_timeout(
        db: Ql, tmp_path: Path) -> None:
    planned = ok(db(*IMPORT, "--dry-run"))
    assert planned.err.splitlines() == [*NOTES, NO_TIMEOUT]
    assert '    timeout: "365d"\n' in planned.out
    assert "MAILTO" not in planned.out

    ok(db(*IMPORT))
    tasks = json.loads(ok(db("task", "list", "--project", "legacy", "--json")).out)
    assert sorted((t["environment"], t["timeout_ms"]) for t in tasks) == [
        (["LANG", "PATH"], 365 * 86_400_000), (["LANG", "PATH"], 365 * 86_400_000),
        (["PATH"], 365 * 86_400_000)]

    written = ok(db(*IMPORT, "-o", "legacy.yaml"))
    assert written.err.splitlines() == [*NOTES, NO_TIMEOUT]
    header, body = (tmp_path / "legacy.yaml").read_text().split("\n---\n", 1)
    assert header.splitlines()[1:] == ["# " + n.removeprefix("note: ")
                                       for n in [*NOTES, NO_TIMEOUT]]
    assert "from_env" not in body and "MAILTO" not in body
    assert body.count("      PATH: /usr/local/bin:/usr/bin:/bin\n") == 3
    assert body.count("    timeout: 365d\n") == 3

    as_json = json.loads(ok(db(*IMPORT, "--dry-run", "--json")).out)
    assert as_json["notes"] == [n.removeprefix("note: ") for n in [*NOTES, NO_TIMEOUT]]


def test_a_timeout_is_given_with_a_flag_and_said(db: Ql) -> None:
    planned = ok(db(*IMPORT, "--timeout", "30m", "--dry-run"))
    assert planned.err.splitlines()[-1] == (
        "note: crontab: every job gets timeout 30m (--timeout)")
    assert '    timeout: "30m"\n' in planned.out
    bad = db(*IMPORT, "--timeout", "400d")
    assert bad.code == 2
    assert "timeout" in bad.err and "365 days" in bad.err


def test_an_imported_crontab_exports_and_applies_back_in_another_environment(
        db: Ql, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ok(db(*IMPORT))
    ok(db("export", "-o", "e.yaml"))
    monkeypatch.setenv("PATH", os.environ["PATH"] + ":/opt/elsewhere")
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    planned = ok(db("apply", "-f", "e.yaml", "--dry-run"))
    assert planned.out.rstrip().endswith("dry run: nothing would change; 6 unchanged; "
                                         "nothing was written")


def test_task_diff_and_history_show_values_as_task_show_does(db: Ql) -> None:
    ok(db("project", "create", "p"))
    ok(db("task", "publish", "--project", "p", "--task", "t", "--env", "HOME=/srv/app",
          "--shell", "echo $HOME"))
    ok(db("task", "publish", "--project", "p", "--task", "t", "--max-attempts", "3",
          "--retry-on-exit", "1,75", "--timeout", "5m", "--cwd", "/tmp", "--idempotent",
          "--concurrency", "2", "--unset-env", "HOME", "--name", "Echo it", "--argv",
          "/bin/echo", "hi"))
    expected = [
        "name: t -> Echo it",
        "command: echo $HOME -> /bin/echo hi",
        "cwd: (the executor directory) -> /tmp",
        "timeout: 1h -> 5m",
        "retry: no (1 attempt) -> up to 3 attempts on exit 1,75, backoff 10s .. 10m",
        "idempotent: no -> yes",
        "limit: none -> 2 at once",
        "env.HOME: (set) -> -",
    ]
    diff = ok(db("task", "diff", "--project", "p", "--task", "t"))
    assert diff.out.splitlines() == ["task p/t: revision 1 -> 2", *("  " + e for e in expected)]
    history = ok(db("task", "show", "--project", "p", "--task", "t")).out.splitlines()[-1]
    assert history.endswith("  " + "; ".join(expected))
    ok(db("task", "disable", "--project", "p", "--task", "t"))
    assert ok(db("task", "diff", "--project", "p", "--task", "t")).out.splitlines()[1:] == [
        "  enabled: yes -> no"]
    as_json = json.loads(ok(db("task", "diff", "--project", "p", "--task", "t", "--from", "1",
                               "--to", "2", "--json")).out)
    assert {"field": "timeout_ms", "from": 3_600_000, "to": 300_000} in as_json["changes"]
