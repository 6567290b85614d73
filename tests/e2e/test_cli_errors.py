"""End-to-end tests of how `ql` refuses bad input.

The product rule: a bad input exits 2 with one line on stderr naming what is wrong,
prints no traceback, and writes nothing (no row, no file). `--help` works everywhere.

The CLI is driven in-process through ``qinglong.cli.main.main``, which always ends in
SystemExit. Every error case runs against a copy of one seeded, migrated SQLite
database and compares a full SQL dump (and the directory listing) before and after.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from qinglong.cli.main import main
from qinglong.storage.sqlite.migrate import MIGRATIONS as SQLITE_MIGRATIONS

SECRET = "s3cretpw"  # a password that must never be echoed back
RUN_A1 = "abcdef01-0000-4000-8000-000000000001"
RUN_A2 = "abcdef01-0000-4000-8000-000000000002"
RUN_B = "12345678-0000-4000-8000-000000000003"
DB = ("--database-url", "{url}")


# --- driving the CLI -------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    code: int | str | None
    out: str
    err: str


def _call(argv: Sequence[str]) -> tuple[int | str | None, str]:
    """Run ``ql argv``; return the exit code and, if main() crashed, the traceback."""
    try:
        main(list(argv))
    except SystemExit as exc:
        return exc.code, ""
    except Exception as exc:
        return None, "".join(traceback.format_exception(exc))
    return None, "main() returned without raising SystemExit\n"


def _ok(*argv: str) -> None:
    code, crash = _call(argv)
    assert code == 0, f"setup step ql {' '.join(argv)} exited {code}\n{crash}"


@pytest.fixture
def ql(capsys: pytest.CaptureFixture[str]) -> Callable[..., Result]:
    def run(*argv: str) -> Result:
        capsys.readouterr()
        code, crash = _call(argv)
        out, err = capsys.readouterr()
        return Result(code=code, out=out, err=err + crash)

    return run


def assert_one_line_error(result: Result, code: int, *needles: str) -> str:
    """Exit ``code``, nothing on stdout, exactly one non-empty stderr line naming the needles."""
    assert "Traceback" not in result.out + result.err, result.err
    assert result.code == code, f"exit {result.code}, stderr: {result.err!r}"
    lines = result.err.splitlines()
    assert len(lines) == 1, f"expected one stderr line, got {lines!r}"
    line = lines[0]
    assert line.strip(), "the error line is blank"
    for needle in needles:
        assert needle in line, f"{needle!r} not named in {line!r}"
    assert result.out == "", f"stdout should be empty on error, got {result.out!r}"
    assert SECRET not in result.out + result.err
    return line


# --- database state ----------------------------------------------------------------------


def dump(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return list(conn.iterdump())


def listing(root: Path) -> list[str]:
    """Every file and directory under root, ignoring SQLite's transient -wal/-shm files."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if not p.name.endswith(("-wal", "-shm", "-journal"))
    )


@dataclass(frozen=True)
class Workspace:
    dir: Path
    db: Path

    @property
    def url(self) -> str:
        return f"sqlite:///{self.db}"  # db is absolute, so this is sqlite:////abs/ql.db

    def expand(self, argv: Sequence[str]) -> list[str]:
        return [a.replace("{url}", self.url).replace("{dir}", str(self.dir)) for a in argv]

    def state(self) -> tuple[list[str], list[str] | None]:
        return listing(self.dir), dump(self.db) if self.db.exists() else None


def _admit_runs(db_path: Path, trigger_id: str, run_ids: Sequence[str]) -> None:
    """Admit one Run per id for ``trigger_id`` through the schedule store (fixed ids), each
    decided at its occurrence: the store reads the (fake) clock set there."""
    from qinglong.domain.admission import AdmissionIds
    from qinglong.domain.decision import Disposition
    from qinglong.domain.schedule import ScheduleClaim
    from qinglong.storage.admission import ScheduleStore
    from qinglong.storage.admission.params import (
        ClaimCommitParams,
        CommitOutcome,
        ScheduleClaimParams,
    )
    from qinglong.storage.sqlite.connection import SqliteDatabase
    from qinglong.storage.sqlite.driver import open_sqlite
    from qinglong.testing import FakeClock

    clock = FakeClock(2**52)
    database = SqliteDatabase(db_path)
    try:
        store = ScheduleStore(open_sqlite(database, clock), actor_id="standalone")

        def claim() -> ScheduleClaim:
            # a claim on SQLite writes nothing: claiming again is free
            claims = store.schedule_claim(ScheduleClaimParams(owner="test", lease_ms=30_000,
                                                              limit=100))
            (found,) = [c for c in claims
                        if isinstance(c, ScheduleClaim) and c.candidate.trigger_id == trigger_id]
            return found

        for n, run_id in enumerate(run_ids):
            clock.set(2**52)  # everything due: find the trigger's cursor
            candidate = claim().candidate
            clock.set(candidate.next_fire_at_ms or candidate.trigger_published_at_ms + 1000)
            claimed = claim()  # decided at the occurrence, when the claim was taken
            decision = claimed.decide(grace_ms=30_000)
            assert decision.disposition is Disposition.ADMIT
            ids = AdmissionIds(run_id=run_id, attempt_id=f"attempt-{n}",
                               created_event_id=f"event-{n}-c", queued_event_id=f"event-{n}-q")
            result = store.schedule_commit(ClaimCommitParams(claim=claimed, decision=decision,
                                                             ids=ids))
            assert result.outcome is CommitOutcome.ADMITTED
    finally:
        database.close()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated database with everything the error cases refer to.

    demo (active): tasks hello, other, off (current revision disabled);
      triggers t1 -> hello (*/5 * * * * UTC), toff -> off (disabled),
      every-second -> hello with Runs RUN_A1, RUN_A2, RUN_B.
    old (archived): task legacy, trigger lt.
    """
    path = tmp_path_factory.mktemp("template") / "ql.db"
    url = ("--database-url", f"sqlite:///{path}")
    _ok("db", "migrate", *url)
    _ok("project", "create", "demo", *url)
    _ok("task", "publish", "--project", "demo", "--task", "hello", "--shell", "echo hi", *url)
    _ok("task", "publish", "--project", "demo", "--task", "other", "--shell", "echo other", *url)
    _ok("task", "publish", "--project", "demo", "--task", "off", "--shell", "echo off", *url)
    _ok("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
        "--cron", "*/5 * * * *", "--timezone", "UTC", *url)
    _ok("trigger", "publish", "--project", "demo", "--trigger", "toff", "--task", "off",
        "--cron", "0 * * * *", "--timezone", "UTC", *url)
    _ok("trigger", "disable", "--project", "demo", "--trigger", "toff", *url)
    _ok("task", "publish", "--project", "demo", "--task", "off", "--shell", "echo off",
        "--disabled", *url)
    _ok("trigger", "publish", "--project", "demo", "--trigger", "every-second", "--task", "hello",
        "--cron", "* * * * * *", "--timezone", "UTC", *url)
    _ok("project", "create", "old", *url)
    _ok("task", "publish", "--project", "old", "--task", "legacy", "--shell", "echo old", *url)
    _ok("trigger", "publish", "--project", "old", "--trigger", "lt", "--task", "legacy",
        "--cron", "0 0 * * *", "--timezone", "UTC", *url)
    _ok("project", "archive", "old", *url)
    _admit_runs(path, "every-second", [RUN_A1, RUN_A2, RUN_B])
    assert not Path(f"{path}-wal").exists(), "template must be checkpointed before copying"
    return path


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ambient database URL, and the default ./qinglong.db would land in tmp_path."""
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def ws(template: Path, tmp_path: Path) -> Workspace:
    db = tmp_path / "ql.db"
    shutil.copyfile(template, db)
    return Workspace(dir=tmp_path, db=db)


# --- --help --------------------------------------------------------------------------------

HELP_PATHS = [
    (), ("db",), ("db", "migrate"), ("db", "check"),
    ("project",), ("project", "create"), ("project", "list"), ("project", "archive"),
    ("task",), ("task", "publish"), ("task", "list"),
    ("trigger",), ("trigger", "publish"), ("trigger", "disable"), ("trigger", "enable"),
    ("trigger", "list"), ("trigger", "preview"),
    ("run",), ("run", "list"), ("run", "show"),
    ("serve",),
]


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("path", HELP_PATHS, ids=lambda p: "ql " + " ".join(p) if p else "ql")
def test_help_works_everywhere(
    ql: Callable[..., Result], ws: Workspace, path: tuple[str, ...], flag: str
) -> None:
    before = ws.state()
    result = ql(*path, flag)
    assert result.code == 0, result.err
    assert result.err == ""
    assert result.out.startswith("Usage: " + " ".join(("ql", *path)))
    assert ws.state() == before


def test_version_works(ql: Callable[..., Result]) -> None:
    result = ql("--version")
    assert result.code == 0
    assert result.out.startswith("ql, version ")


# --- bad input: exit 2, one line, nothing written ----------------------------------------


@dataclass(frozen=True)
class Bad:
    argv: tuple[str, ...]
    needles: tuple[str, ...]
    code: int = 2


def bad(case_id: str, *argv: str, needles: Sequence[str], reason: str | None = None) -> object:
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(Bad(argv=argv, needles=tuple(needles)), id=case_id, marks=marks)


def publish_task(*extra: str) -> tuple[str, ...]:
    # the database option goes first: words after --argv's program belong to the program
    return ("task", "publish", "--project", "demo", "--task", "fresh", *DB, *extra)


def publish_trigger(*extra: str, task: str = "hello") -> tuple[str, ...]:
    return ("trigger", "publish", "--project", "demo", "--trigger", "fresh", "--task", task,
            *extra, *DB)


def new_cron(expr: str) -> tuple[str, ...]:
    return publish_trigger("--cron", expr, "--timezone", "UTC")


def new_zone(zone: str) -> tuple[str, ...]:
    return publish_trigger("--cron", "0 9 * * *", "--timezone", zone)


def preview(*extra: str) -> tuple[str, ...]:
    return ("trigger", "preview", *extra)


def serve(*extra: str) -> tuple[str, ...]:
    # --duration bounds the run if a bad value were ever accepted, so a regression fails
    # instead of hanging the suite.
    return ("serve", *DB, "--duration", "50ms", *extra)


USAGE_CASES = [
    bad("unknown-option-top", "--bogus", needles=["--bogus"]),
    bad("unknown-command", "bogus", needles=["bogus"]),
    bad("unknown-option-db-migrate", "db", "migrate", "--force", *DB, needles=["--force"]),
    bad("unknown-option-project-create", "project", "create", "x", "--colour", "red", *DB,
        needles=["--colour"]),
    bad("unknown-option-task-publish", *publish_task("--retries", "3"), needles=["--retries"]),
    bad("unknown-option-trigger-publish", *new_cron("* * * * *"), "--jiggle", "5s",
        needles=["--jiggle"]),
    bad("unknown-option-trigger-preview", *preview("--cron", "* * * * *", "--timezone", "UTC",
                                                   "--misfire", "skip"), needles=["--misfire"]),
    bad("unknown-option-run-list", "run", "list", "--after", "1h", *DB, needles=["--after"]),
    bad("unknown-option-serve", *serve("--workers", "3"), needles=["--workers"]),
    bad("missing-arg-project-create", "project", "create", *DB, needles=["PROJECT"]),
    bad("missing-arg-project-archive", "project", "archive", *DB, needles=["PROJECT"]),
    bad("missing-arg-run-show", "run", "show", *DB, needles=["RUN"]),
    bad("missing-task-publish-project", "task", "publish", "--task", "x", "--shell", "true", *DB,
        needles=["--project"]),
    bad("missing-task-publish-task", "task", "publish", "--project", "demo", "--shell", "true",
        *DB, needles=["--task"]),
    bad("missing-task-list-project", "task", "list", *DB, needles=["--project"]),
    bad("missing-trigger-publish-trigger", "trigger", "publish", "--project", "demo", "--task",
        "hello", *DB, needles=["--trigger"]),
    bad("missing-trigger-publish-project", "trigger", "publish", "--trigger", "t1", *DB,
        needles=["--project"]),
    bad("missing-trigger-disable-project", "trigger", "disable", "--trigger", "t1", *DB,
        needles=["--project"]),
    bad("missing-trigger-enable-trigger", "trigger", "enable", "--project", "demo", *DB,
        needles=["--trigger"]),
    bad("missing-preview-cron", *preview("--timezone", "UTC"), needles=["--cron"]),
    bad("missing-preview-timezone", *preview("--cron", "* * * * *"), needles=["--timezone"]),
    bad("option-without-value", "task", "list", *DB, "--project", needles=["--project"]),
]

PROJECT_ID_CASES = [
    bad("project-uppercase", "project", "create", "Demo2", *DB, needles=["project"]),
    bad("project-space", "project", "create", "my project", *DB, needles=["project"]),
    bad("project-too-long", "project", "create", "a" * 129, *DB, needles=["project"]),
    bad("project-leading-dash", "project", "create", *DB, "--", "-demo", needles=["project"]),
    bad("project-leading-dash-as-option", "project", "create", "-demo", *DB, needles=["-d"]),
    bad("project-trailing-dash", "project", "create", "demo-", *DB, needles=["project"]),
    bad("project-underscore", "project", "create", "my_proj", *DB, needles=["project"]),
    bad("project-empty", "project", "create", "", *DB, needles=["project"]),
    bad("project-archive-uppercase", "project", "archive", "Demo", *DB, needles=["project"]),
    bad("task-publish-project-uppercase", "task", "publish", "--project", "Demo", "--task", "x",
        "--shell", "true", *DB, needles=["project"]),
    bad("trigger-publish-project-space", "trigger", "publish", "--project", "my demo",
        "--trigger", "x", "--task", "hello", "--cron", "* * * * *", "--timezone", "UTC", *DB,
        needles=["project"]),
    bad("project-name-control-char", "project", "create", "named", "--name", "a\x01b", *DB,
        needles=["name"]),
    bad("project-name-too-long", "project", "create", "named", "--name", "x" * 256, *DB,
        needles=["name"]),
    bad("task-id-space", "task", "publish", "--project", "demo", "--task", "my task",
        "--shell", "true", *DB, needles=["task"]),
    bad("task-id-trailing-dot", "task", "publish", "--project", "demo", "--task", "job.",
        "--shell", "true", *DB, needles=["task"]),
    bad("trigger-id-space", "trigger", "publish", "--project", "demo", "--trigger", "my trigger",
        "--task", "hello", "--cron", "* * * * *", "--timezone", "UTC", *DB, needles=["trigger"]),
    bad("task-name-newline", *publish_task("--shell", "true", "--name", "two\nlines"),
        needles=["name"]),
]

RECORD_CASES = [
    bad("duplicate-project", "project", "create", "demo", *DB, needles=["demo", "already exists"]),
    bad("archive-unknown-project", "project", "archive", "nope", *DB, needles=["'nope'"]),
    bad("archive-archived-project", "project", "archive", "old", *DB,
        needles=["'old'", "archived"]),
    bad("task-list-unknown-project", "task", "list", "--project", "nope", *DB, needles=["'nope'"]),
    bad("trigger-list-unknown-project", "trigger", "list", "--project", "nope", *DB,
        needles=["'nope'"]),
    bad("task-publish-unknown-project", "task", "publish", "--project", "nope", "--task", "x",
        "--shell", "true", *DB, needles=["'nope'"]),
    bad("trigger-publish-unknown-project", "trigger", "publish", "--project", "nope",
        "--trigger", "x", "--task", "hello", "--cron", "* * * * *", "--timezone", "UTC", *DB,
        needles=["'nope'"]),
    bad("trigger-publish-unknown-task", *publish_trigger("--cron", "* * * * *", "--timezone",
                                                         "UTC", task="nope"),
        needles=["task", "'nope'"]),
    bad("trigger-disable-unknown", "trigger", "disable", "--project", "demo", "--trigger", "nope",
        *DB, needles=["trigger", "'nope'"]),
    bad("trigger-enable-unknown", "trigger", "enable", "--project", "demo", "--trigger", "nope",
        *DB, needles=["trigger", "'nope'"]),
    bad("run-show-unknown-full-id", "run", "show", "ffffffff-0000-4000-8000-000000000009", *DB,
        needles=["run", "ffffffff-0000-4000-8000-000000000009"]),
    bad("run-show-unknown-short", "run", "show", "abc", *DB, needles=["run", "'abc'"]),
    bad("run-show-ambiguous-prefix", "run", "show", "abcdef01", *DB,
        needles=["run", "abcdef01", "more than one"]),
    bad("task-publish-archived-project", "task", "publish", "--project", "old", "--task",
        "legacy", "--shell", "echo new", *DB, needles=["'old'", "archived"]),
    bad("trigger-publish-archived-project", "trigger", "publish", "--project", "old",
        "--trigger", "lt", "--cron", "5 0 * * *", *DB, needles=["'old'", "archived"]),
    bad("trigger-new-archived-project", "trigger", "publish", "--project", "old", "--trigger",
        "lt2", "--task", "legacy", "--cron", "0 0 * * *", "--timezone", "UTC", *DB,
        needles=["'old'", "archived"]),
    bad("trigger-disable-archived-project", "trigger", "disable", "--project", "old",
        "--trigger", "lt", *DB, needles=["'old'", "archived"]),
    bad("trigger-enable-archived-project", "trigger", "enable", "--project", "old",
        "--trigger", "lt", *DB, needles=["'old'", "archived"]),
    bad("trigger-move-to-other-task", "trigger", "publish", "--project", "demo", "--trigger",
        "t1", "--task", "other", *DB, needles=["'t1'", "'hello'"]),
    bad("trigger-move-with-new-cron", "trigger", "publish", "--project", "demo", "--trigger",
        "t1", "--task", "other", "--cron", "0 * * * *", *DB, needles=["'t1'", "'hello'"]),
    bad("trigger-enable-on-disabled-task", "trigger", "enable", "--project", "demo",
        "--trigger", "toff", *DB, needles=["'off'", "disabled"]),
    bad("trigger-new-on-disabled-task", *publish_trigger("--cron", "0 * * * *", "--timezone",
                                                         "UTC", task="off"),
        needles=["'off'", "disabled"]),
]

TASK_CASES = [
    bad("no-command", *publish_task(), needles=["--shell", "--argv"]),
    bad("shell-and-argv", *publish_task("--shell", "echo", "--argv", "/bin/echo"),
        needles=["--shell", "--argv"]),
    bad("argv-relative-path", *publish_task("--argv", "echo", "hi"),
        needles=["--argv", "absolute"]),
    bad("argv-dot-path", *publish_task("--argv", "./run.sh"), needles=["--argv: "]),
    bad("argv-nothing-after", *publish_task("--argv"), needles=["argv"]),
    bad("argv-option-after-program", *publish_task("--argv", "/bin/echo", "hi", "--timeout", "5s"),
        needles=["'--timeout'", "before the program", "--"]),
    bad("argv-option-with-value-after-program", *publish_task("--argv", "/bin/echo", "--name=x"),
        needles=["'--name=x'"]),
    bad("bash-with-argv", *publish_task("--bash", "--argv", "/bin/echo"), needles=["bash"]),
    bad("bash-without-shell", *publish_task("--bash"), needles=["--shell"]),
    bad("shell-blank", *publish_task("--shell", "   "), needles=["--shell: must not be blank"]),
    bad("shell-empty", *publish_task("--shell", ""), needles=["--shell: must not be empty"]),
    bad("shell-extra-words", "task", "publish", "--project", "demo", "--task", "fresh",
        "--shell", "echo", *DB, "extra", needles=["'extra'"]),
    bad("env-no-equals", *publish_task("--shell", "true", "--env", "FOO"),
        needles=["env", "'FOO'"]),
    bad("env-reserved-prefix", *publish_task("--shell", "true", "--env", "QL_TOKEN=x"),
        needles=["env", "QL_"]),
    bad("env-reserved-prefix-lowercase", *publish_task("--shell", "true", "--env", "ql_token=x"),
        needles=["env", "QL_"]),
    bad("env-duplicate", *publish_task("--shell", "true", "--env", "A=1", "--env", "A=2"),
        needles=["env", "'A'"]),
    bad("env-name-digit-first", *publish_task("--shell", "true", "--env", "1A=1"),
        needles=["env", "'1A'"]),
    bad("env-name-dash", *publish_task("--shell", "true", "--env", "A-B=1"),
        needles=["env", "'A-B'"]),
    bad("env-name-empty", *publish_task("--shell", "true", "--env", "=value"),
        needles=["env", "''"]),
    bad("env-name-space", *publish_task("--shell", "true", "--env", "MY VAR=1"),
        needles=["env", "'MY VAR'"]),
    bad("cwd-relative", *publish_task("--shell", "true", "--cwd", "tmp/work"),
        needles=["--cwd: ", "absolute"]),
    bad("cwd-empty", *publish_task("--shell", "true", "--cwd", ""),
        needles=["--cwd: "]),
    bad("cwd-missing-here", *publish_task("--shell", "true", "--cwd", "/no/such/dir"),
        needles=["--cwd: ", "'/no/such/dir' does not exist on this host"]),
    bad("timeout-no-unit", *publish_task("--shell", "true", "--timeout", "10"),
        needles=["--timeout"]),
    bad("timeout-zero", *publish_task("--shell", "true", "--timeout", "0s"), needles=["timeout"]),
    bad("timeout-zero-ms", *publish_task("--shell", "true", "--timeout", "0ms"),
        needles=["timeout"]),
    bad("timeout-over-365-days", *publish_task("--shell", "true", "--timeout", "366d"),
        needles=["timeout", "365 days"]),
    bad("timeout-just-over-365-days", *publish_task("--shell", "true", "--timeout", "31536001s"),
        needles=["timeout"]),
    bad("timeout-negative", *publish_task("--shell", "true", "--timeout", "-5s"),
        needles=["--timeout"]),
    bad("timeout-garbage", *publish_task("--shell", "true", "--timeout", "soon"),
        needles=["--timeout"]),
    bad("timeout-fraction-of-ms", *publish_task("--shell", "true", "--timeout", "1.5ms"),
        needles=["--timeout"]),
    bad("timeout-unknown-unit", *publish_task("--shell", "true", "--timeout", "2w"),
        needles=["--timeout"]),
    bad("timeout-huge-number", *publish_task("--shell", "true", "--timeout", "1" + "0" * 400 + "s"),
        needles=["--timeout"]),
]

TRIGGER_CASES = [
    bad("cron-too-few-fields", *new_cron("* * * *"), needles=["cron", "got 4"]),
    bad("cron-too-many-fields", *new_cron("* * * * * * *"), needles=["cron", "got 7"]),
    bad("cron-empty", *new_cron(""), needles=["cron"]),
    bad("cron-minute-60", *new_cron("60 * * * *"), needles=["cron", "minute"]),
    bad("cron-hour-24", *new_cron("0 24 * * *"), needles=["cron", "hour"]),
    bad("cron-day-32", *new_cron("0 0 32 * *"), needles=["cron", "day-of-month"]),
    bad("cron-day-0", *new_cron("0 0 0 * *"), needles=["cron", "day-of-month"]),
    bad("cron-month-13", *new_cron("0 0 1 13 *"), needles=["cron", "month"]),
    bad("cron-weekday-8", *new_cron("0 0 * * 8"), needles=["cron", "day-of-week"]),
    bad("cron-second-60", *new_cron("60 0 0 * * *"), needles=["cron", "second"]),
    bad("cron-step-zero", *new_cron("*/0 * * * *"), needles=["cron"]),
    bad("cron-reversed-range", *new_cron("5-1 * * * *"), needles=["cron"]),
    bad("cron-february-30", *new_cron("0 0 30 2 *"), needles=["cron"]),
    bad("cron-macro-daily", *new_cron("@daily"), needles=["cron", "@daily"]),
    bad("cron-macro-hourly", *new_cron("@hourly"), needles=["cron"]),
    bad("cron-macro-reboot", *new_cron("@reboot"), needles=["cron"]),
    bad("cron-question-mark", *new_cron("0 0 * * ?"), needles=["cron", "'?'"]),
    bad("cron-semicolon", *new_cron("0 9 * * MON;rm"), needles=["cron", "MON;rm"]),
    bad("cron-bad-name", *new_cron("0 0 1 JANUARY *"), needles=["cron"]),
    bad("cron-existing-trigger", "trigger", "publish", "--project", "demo", "--trigger", "t1",
        "--cron", "61 * * * *", *DB, needles=["cron"]),
    bad("timezone-unknown", *new_zone("Mars/Olympus"), needles=["timezone", "Mars/Olympus"]),
    bad("timezone-lowercase-utc", *new_zone("utc"), needles=["timezone", "'UTC'"]),
    bad("timezone-lowercase-berlin", *new_zone("europe/berlin"),
        needles=["timezone", "'Europe/Berlin'"]),
    bad("timezone-lowercase-shanghai", *new_zone("asia/shanghai"),
        needles=["timezone", "'Asia/Shanghai'"]),
    bad("timezone-mixed-case-new-york", *new_zone("America/new_york"),
        needles=["timezone", "'America/New_York'"]),
    bad("timezone-offset", *new_zone("+08:00"), needles=["timezone"]),
    bad("timezone-empty", *new_zone(""), needles=["timezone"]),
    bad("timezone-trailing-newline", *new_zone("Europe/Berlin\n"), needles=["timezone"]),
    bad("timezone-path", *new_zone("../../etc/passwd"), needles=["timezone"]),
    bad("timezone-existing-trigger", "trigger", "publish", "--project", "demo", "--trigger", "t1",
        "--timezone", "Europe/Nowhere", *DB, needles=["timezone"]),
    bad("misfire-unknown", *publish_trigger("--cron", "* * * * *", "--timezone", "UTC",
                                            "--misfire", "always"), needles=["--misfire"]),
    bad("misfire-uppercase", *publish_trigger("--cron", "* * * * *", "--timezone", "UTC",
                                              "--misfire", "SKIP"), needles=["--misfire"]),
    bad("new-trigger-without-cron", *publish_trigger("--timezone", "UTC"), needles=["cron"]),
    bad("new-trigger-without-timezone", *publish_trigger("--cron", "* * * * *"),
        needles=["timezone"]),
    bad("new-trigger-without-task", "trigger", "publish", "--project", "demo", "--trigger",
        "fresh", "--cron", "* * * * *", "--timezone", "UTC", *DB, needles=["task"]),
    bad("trigger-list-next-101", "trigger", "list", "--project", "demo", "--next", "101", *DB,
        needles=["--next"]),
]

PREVIEW_CASES = [
    bad("preview-after-garbage", *preview("--cron", "* * * * *", "--timezone", "UTC",
                                          "--after", "yesterday"), needles=["after"]),
    bad("preview-after-no-offset", *preview("--cron", "* * * * *", "--timezone", "UTC",
                                            "--after", "2026-03-08T00:00:00"),
        needles=["after", "offset"]),
    bad("preview-after-date-only", *preview("--cron", "* * * * *", "--timezone", "UTC",
                                            "--after", "2026-03-08"), needles=["after"]),
    bad("preview-after-month-13", *preview("--cron", "* * * * *", "--timezone", "UTC",
                                           "--after", "2026-13-01T00:00:00Z"), needles=["after"]),
    bad("preview-after-offset-25h", *preview("--cron", "* * * * *", "--timezone", "UTC",
                                             "--after", "2026-03-08T00:00:00+25:00"),
        needles=["after"]),
    bad("preview-count-0", *preview("--cron", "* * * * *", "--timezone", "UTC", "--count", "0"),
        needles=["--count"]),
    bad("preview-count-1001", *preview("--cron", "* * * * *", "--timezone", "UTC",
                                       "--count", "1001"), needles=["--count"]),
    bad("preview-count-garbage", *preview("--cron", "* * * * *", "--timezone", "UTC",
                                          "--count", "ten"), needles=["--count"]),
    bad("preview-bad-cron", *preview("--cron", "* * *", "--timezone", "UTC"), needles=["cron"]),
    bad("preview-macro", *preview("--cron", "@weekly", "--timezone", "UTC"), needles=["cron"]),
    bad("preview-lowercase-zone", *preview("--cron", "* * * * *", "--timezone", "asia/tokyo"),
        needles=["timezone", "'Asia/Tokyo'"]),
]

RUN_CASES = [
    bad("run-list-limit-0", "run", "list", "--limit", "0", *DB, needles=["--limit"]),
    bad("run-list-limit-10001", "run", "list", "--limit", "10001", *DB, needles=["--limit"]),
    bad("run-list-limit-negative", "run", "list", "--limit", "-1", *DB, needles=["--limit"]),
    bad("run-list-bad-status", "run", "list", "--status", "bogus", *DB, needles=["--status"]),
    bad("run-list-status-uppercase", "run", "list", "--status", "QUEUED", *DB,
        needles=["--status"]),
    bad("run-show-tail-negative", "run", "show", RUN_B, "--tail", "-1", *DB, needles=["--tail"]),
    bad("run-list-unknown-project", "run", "list", "--project", "nope", *DB, needles=["'nope'"]),
    bad("run-list-invalid-project-id", "run", "list", "--project", "Not A Project", *DB,
        needles=["project"]),
    bad("run-show-like-percent", "run", "show", "%000000000001", *DB, needles=["run"]),
    bad("run-show-like-underscore", "run", "show", "_" + RUN_A1[1:], *DB, needles=["run"]),
]

URL_CASES = [
    bad("url-mysql-project-list", "project", "list", "--database-url", "mysql://u@h/db",
        needles=["database-url"]),
    bad("url-mysql-db-migrate", "db", "migrate", "--database-url", "mysql://u@h/db",
        needles=["database-url"]),
    bad("url-mysql-db-check", "db", "check", "--database-url", "mysql://u@h/db",
        needles=["database-url"]),
    bad("url-mysql-serve", "serve", "--database-url", "mysql://u@h/db", "--duration", "50ms",
        needles=["database-url"]),
    bad("url-not-a-url", "project", "list", "--database-url", "qinglong.db",
        needles=["database-url"]),
    bad("url-sqlite-with-host", "project", "list", "--database-url",
        "sqlite://dbhost/{dir}/ql.db", needles=["database-url", "host"]),
    bad("url-sqlite-with-host-migrate", "db", "migrate", "--database-url",
        "sqlite://dbhost/{dir}/new.db", needles=["database-url", "host"]),
    bad("url-sqlite-with-query", "project", "list", "--database-url", "{url}?mode=ro",
        needles=["database-url", "query"]),
    bad("url-sqlite-no-path", "project", "list", "--database-url", "sqlite:///",
        needles=["database-url"]),
    bad("url-sqlite-trailing-slash", "db", "migrate", "--database-url", "sqlite:///{dir}/",
        needles=["database-url"]),
    bad("url-missing-file-project-list", "project", "list", "--database-url",
        "sqlite:///{dir}/missing.db", needles=["database-url", "missing.db", "ql db migrate"]),
    bad("url-missing-file-project-create", "project", "create", "demo2", "--database-url",
        "sqlite:///{dir}/missing.db", needles=["database-url", "missing.db"]),
    bad("url-missing-file-task-publish", "task", "publish", "--project", "demo", "--task", "x",
        "--shell", "true", "--database-url", "sqlite:///{dir}/missing.db",
        needles=["database-url", "missing.db"]),
    bad("url-missing-file-db-check", "db", "check", "--database-url",
        "sqlite:///{dir}/missing.db", needles=["database-url", "missing.db"]),
    bad("url-missing-file-run-show", "run", "show", RUN_B, "--database-url",
        "sqlite:///{dir}/missing.db", needles=["database-url", "missing.db"]),
    bad("url-missing-relative-file", "project", "list", "--database-url",
        "sqlite:///./missing.db", needles=["database-url", "missing.db"]),
    bad("url-default-missing", "project", "list", needles=["database-url", "qinglong.db"]),
    bad("url-migrate-missing-directory", "db", "migrate", "--database-url",
        "sqlite:///{dir}/no/such/dir/ql.db", needles=["database-url", "does not exist"]),
    bad("url-password-postgresql", "project", "list", "--database-url",
        f"postgresql://admin:{SECRET}@db.example/ql", needles=["--database-url", "password"]),
    bad("url-password-query", "project", "list", "--database-url",
        f"postgresql://admin@db.example/ql?password={SECRET}",
        needles=["--database-url", "password"]),
    bad("url-password-sqlite", "project", "list", "--database-url",
        f"sqlite://admin:{SECRET}@localhost/{{dir}}/ql.db", needles=["--database-url", "password"]),
    bad("url-password-db-migrate", "db", "migrate", "--database-url",
        f"postgresql://admin:{SECRET}@db.example/ql", needles=["--database-url", "password"]),
    bad("url-password-serve", "serve", "--database-url",
        f"postgresql://admin:{SECRET}@db.example/ql", needles=["--database-url", "password"]),
    bad("url-postgresql-serve", "serve", "--database-url", "postgresql://admin@db.example/ql",
        "--duration", "50ms", needles=["database-url", "SQLite"]),
    bad("url-directory", "project", "list", "--database-url", "sqlite:///{dir}",
        needles=["database-url"]),
]

SERVE_CASES = [
    bad("serve-interval-10ms", *serve("--interval", "10ms"), needles=["interval"]),
    bad("serve-interval-249ms", *serve("--interval", "249ms"), needles=["interval"]),
    bad("serve-interval-over-1h", *serve("--interval", "61m"), needles=["interval"]),
    bad("serve-interval-no-unit", *serve("--interval", "5"), needles=["--interval"]),
    bad("serve-interval-huge-number", *serve("--interval", "9" * 400 + "ms"),
        needles=["--interval"]),
    bad("serve-budget-0", *serve("--budget", "0"), needles=["--budget"]),
    bad("serve-budget-257", *serve("--budget", "257"), needles=["--budget"]),
    bad("serve-grace-301s", *serve("--grace", "301s"), needles=["grace"]),
    bad("serve-grace-negative", *serve("--grace", "-1s"), needles=["--grace"]),
    bad("serve-concurrency-0", *serve("--concurrency", "0"), needles=["--concurrency"]),
    bad("serve-drain-timeout-2h", *serve("--drain-timeout", "2h"), needles=["drain-timeout"]),
    bad("serve-log-max-bytes-small", *serve("--log-max-bytes", "10"),
        needles=["--log-max-bytes"]),
    bad("serve-unknown-profile", *serve("--profile", "cluster"), needles=["--profile"]),
]

def worker(*extra: str) -> tuple[str, ...]:
    # Settings are checked before any connection: nothing listens on port 1, so a bad value
    # that slipped through would fail with exit 1 (connection refused), not 2.
    return ("worker", "--database-url", "postgresql://ql_worker@127.0.0.1:1/ql", "--worker-id",
            "w1", *extra)


WORKER_CASES = [
    bad("worker-slots-0", *worker("--slots", "0"), needles=["--slots"]),
    bad("worker-slots-257", *worker("--slots", "257"), needles=["--slots"]),
    bad("worker-lease-short", *worker("--lease-ms", "4999"), needles=["--lease-ms"]),
    bad("worker-poll-fast", *worker("--poll-ms", "50"), needles=["--poll-ms"]),
    bad("worker-pool-1", *worker("--pool-size", "1"), needles=["--pool-size"]),
    bad("worker-id-bad", "worker", "--database-url", "postgresql://ql_worker@127.0.0.1:1/ql",
        "--worker-id", "no spaces", needles=["--worker-id"]),
    bad("worker-id-missing", "worker", "--database-url", "postgresql://ql_worker@127.0.0.1:1/ql",
        needles=["--worker-id"]),
    bad("worker-http-bad", *worker("--http", "nowhere"), needles=["--http"]),
    bad("worker-drain-both", *worker("--drain-timeout", "5s", "--drain-timeout-ms", "100"),
        needles=["--drain-timeout"]),
    bad("worker-drain-no-unit", *worker("--drain-timeout", "5"), needles=["--drain-timeout"]),
    bad("worker-sqlite-url", "worker", "--database-url", "sqlite:///x.db",
        needles=["--database-url"]),
]

CONTROL_CASES = [
    # a claim lease not shorter than the grace: refused unless --allow-lease-over-grace
    bad("control-lease-over-grace", "control", "--database-url",
        "postgresql://ql_runtime@127.0.0.1:1/ql", "--owner-id", "c1", "--lease-ms", "30000",
        needles=["--lease-ms", "--allow-lease-over-grace"]),
]

ALL_BAD = (USAGE_CASES + PROJECT_ID_CASES + RECORD_CASES + TASK_CASES + TRIGGER_CASES
           + PREVIEW_CASES + RUN_CASES + URL_CASES + SERVE_CASES + WORKER_CASES
           + CONTROL_CASES)


@pytest.mark.parametrize("case", ALL_BAD)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    ql: Callable[..., Result], ws: Workspace, case: Bad
) -> None:
    before = ws.state()
    result = ql(*ws.expand(case.argv))
    assert_one_line_error(result, case.code, *case.needles)
    assert ws.state() == before, "a refused command changed the database or created files"


def test_bad_input_cases_have_unique_ids() -> None:
    ids = [p.id for p in ALL_BAD]  # type: ignore[attr-defined]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize(
    ("url", "code", "needle"),
    [
        (f"mysql://admin:{SECRET}@db.example/ql", 2, "database-url"),
        (f"sqlite://admin:{SECRET}@dbhost/ql.db", 2, "database-url"),
        # Nothing listens on port 1: the connection is refused at once (a failure, exit 1).
        (f"postgresql://admin:{SECRET}@127.0.0.1:1/ql", 1, "PostgreSQL"),
    ],
    ids=["mysql", "sqlite-with-host", "postgresql-unreachable"],
)
def test_password_from_environment_is_allowed_but_never_echoed(
    ql: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    url: str, code: int, needle: str,
) -> None:
    """QL_DATABASE_URL may carry a password (only the command line may not); errors hide it."""
    monkeypatch.setenv("QL_DATABASE_URL", url)
    result = ql("project", "list")
    line = assert_one_line_error(result, code, needle)
    assert "password" not in line  # not refused as a command-line password
    assert listing(tmp_path) == []


# --- not ready (exit 3) --------------------------------------------------------------------


@pytest.fixture
def empty_db(tmp_path: Path) -> Path:
    """An empty (never migrated) SQLite file, created with the sqlite3 module."""
    path = tmp_path / "empty.db"
    sqlite3.connect(path).close()
    assert path.exists()
    return path


def test_db_check_on_unmigrated_file_exits_3_with_findings(
    ql: Callable[..., Result], empty_db: Path
) -> None:
    result = ql("db", "check", "--database-url", f"sqlite:///{empty_db}")
    assert result.code == 3
    assert "Traceback" not in result.out + result.err
    assert result.out.splitlines() == [f"missing-migration:{m.id}" for m in SQLITE_MIGRATIONS]
    as_json = ql("db", "check", "--json", "--database-url", f"sqlite:///{empty_db}")
    assert as_json.code == 3
    assert json.loads(as_json.out) == {
        "ready": False, "findings": [f"missing-migration:{m.id}" for m in SQLITE_MIGRATIONS]}


@pytest.mark.parametrize(
    "argv",
    [
        ("project", "list"),
        ("project", "create", "demo"),
        ("task", "publish", "--project", "demo", "--task", "x", "--shell", "true"),
        ("trigger", "list", "--project", "demo"),
        ("run", "list"),
    ],
    ids=lambda a: "-".join(a[:2]),
)
def test_commands_on_unmigrated_file_exit_3_and_create_no_schema(
    ql: Callable[..., Result], empty_db: Path, argv: tuple[str, ...]
) -> None:
    result = ql(*argv, "--database-url", f"sqlite:///{empty_db}")
    assert_one_line_error(result, 3, "ql db migrate")
    assert dump(empty_db) == ["BEGIN TRANSACTION;", "COMMIT;"]


@pytest.mark.parametrize("kind", ["empty-file", "foreign-db"])
def test_db_check_does_not_modify_the_file(
    ql: Callable[..., Result], tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        if kind == "foreign-db":
            conn.execute("CREATE TABLE notes (body TEXT)")
            conn.commit()
    before = path.read_bytes()
    result = ql("db", "check", "--database-url", f"sqlite:///{path}")
    assert result.code == 3
    assert path.read_bytes() == before
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


@pytest.mark.parametrize("kind", ["missing-file", "unmigrated-file"])
def test_serve_that_cannot_start_prints_only_the_error(
    ql: Callable[..., Result], tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "serve.db"
    if kind == "unmigrated-file":
        sqlite3.connect(path).close()
    before = listing(tmp_path)
    result = ql("serve", "--database-url", f"sqlite:///{path}", "--duration", "50ms")
    assert_one_line_error(result, 2 if kind == "missing-file" else 3, "database")
    assert listing(tmp_path) == before


# --- a group without a subcommand -----------------------------------------------------------


@pytest.mark.parametrize("path", [(), ("db",), ("task",), ("trigger",)],
                         ids=lambda p: "ql " + " ".join(p) if p else "ql")
def test_group_without_subcommand_shows_help_or_names_the_missing_command(
    ql: Callable[..., Result], path: tuple[str, ...]
) -> None:
    result = ql(*path)
    assert "Traceback" not in result.out + result.err
    if result.code == 0:
        assert result.out.startswith("Usage:")
        return
    line = assert_one_line_error(result, 2, "command")
    assert "Usage:" not in line and "Options:" not in line


# --- success paths that pin documented behaviour -------------------------------------------


def test_publishing_the_same_task_twice_is_unchanged(
    ql: Callable[..., Result], ws: Workspace
) -> None:
    argv = ("task", "publish", "--project", "demo", "--task", "fresh", "--shell", "echo hi",
            "--env", "B=2", "--env", "A=1", "--timeout", "90s", "--database-url", ws.url)
    first = ql(*argv)
    assert first.code == 0, first.err
    assert first.out.startswith("published task demo/fresh revision 1 ")
    before = dump(ws.db)
    again = ql(*argv[:8], "--env", "A=1", "--env", "B=2", *argv[12:])  # same env, other order
    assert again.code == 0, again.err
    assert again.out == "task demo/fresh unchanged at revision 1\n"
    assert again.err == ""
    assert dump(ws.db) == before
    listed = ql("task", "list", "--project", "demo", "--json", "--database-url", ws.url)
    (fresh,) = [t for t in json.loads(listed.out) if t["task"] == "fresh"]
    assert fresh["revision"] == 1
    assert fresh["timeout_ms"] == 90_000
    assert fresh["environment"] == ["A", "B"]


def test_republishing_a_trigger_is_unchanged(ql: Callable[..., Result], ws: Workspace) -> None:
    before = dump(ws.db)
    result = ql("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
                "--cron", "*/5  *  * * *", "--timezone", "Etc/UTC", "--database-url", ws.url)
    assert result.code == 0, result.err
    assert result.out == "trigger demo/t1 unchanged at revision 1\n"
    assert dump(ws.db) == before


def test_project_list_json(ql: Callable[..., Result], ws: Workspace) -> None:
    result = ql("project", "list", "--json", "--database-url", ws.url)
    assert result.code == 0, result.err
    rows = json.loads(result.out)
    assert {r["id"]: r["status"] for r in rows} == {"demo": "active", "old": "archived"}


def test_task_list_json(ql: Callable[..., Result], ws: Workspace) -> None:
    result = ql("task", "list", "--project", "demo", "--json", "--database-url", ws.url)
    assert result.code == 0, result.err
    rows = {r["task"]: r for r in json.loads(result.out)}
    assert set(rows) == {"hello", "other", "off"}
    assert (rows["hello"]["revision"], rows["hello"]["enabled"]) == (1, True)
    assert (rows["off"]["revision"], rows["off"]["enabled"]) == (2, False)
    assert rows["hello"]["command"] == {"kind": "shell", "command": "echo hi", "shell": "/bin/sh"}


def test_trigger_list_json(ql: Callable[..., Result], ws: Workspace) -> None:
    result = ql("trigger", "list", "--project", "demo", "--json", "--next", "2",
                "--database-url", ws.url)
    assert result.code == 0, result.err
    rows = {r["trigger"]: r for r in json.loads(result.out)}
    assert set(rows) == {"t1", "toff", "every-second"}
    assert rows["t1"]["state"] == "firing"
    assert rows["t1"]["cron"] == "*/5 * * * *"
    assert len(rows["t1"]["next_fire_at_ms"]) == 2
    assert rows["toff"]["state"] == "disabled"
    assert rows["toff"]["next_fire_at_ms"] == []


def test_run_list_json(ql: Callable[..., Result], ws: Workspace) -> None:
    result = ql("run", "list", "--project", "demo", "--json", "--database-url", ws.url)
    assert result.code == 0, result.err
    rows = json.loads(result.out)
    assert {r["id"] for r in rows} == {RUN_A1, RUN_A2, RUN_B}
    assert all(r["status"] == "queued" and r["trigger"] == "every-second" for r in rows)
    scheduled = [r["scheduled_for_ms"] for r in rows]
    assert scheduled == sorted(scheduled, reverse=True)


def test_run_show_accepts_a_unique_prefix(ql: Callable[..., Result], ws: Workspace) -> None:
    result = ql("run", "show", RUN_B[:8], "--json", "--database-url", ws.url)
    assert result.code == 0, result.err
    detail = json.loads(result.out)
    assert detail["run"]["id"] == RUN_B
    assert [e["type"] for e in detail["events"]] == ["run.created", "run.queued"]


def test_trigger_preview_json_marks_the_dst_gap(ql: Callable[..., Result]) -> None:
    result = ql("trigger", "preview", "--cron", "30 2 * * *", "--timezone", "Europe/Berlin",
                "--after", "2026-03-28T00:00:00Z", "--count", "3", "--json")
    assert result.code == 0, result.err
    body = json.loads(result.out)
    assert (body["cron"], body["timezone"]) == ("30 2 * * *", "Europe/Berlin")
    assert [o["utc"] for o in body["occurrences"]] == [
        "2026-03-28T01:30:00.000Z",  # 02:30 CET
        "2026-03-29T01:00:00.000Z",  # 02:30 does not exist: fires at the gap's end, 03:00 CEST
        "2026-03-30T00:30:00.000Z",  # 02:30 CEST
    ]
    assert [o["dst"] for o in body["occurrences"]] == [None, "gap-shifted", None]


def test_timezone_alias_is_canonicalised(ql: Callable[..., Result], ws: Workspace) -> None:
    result = ql("trigger", "publish", "--project", "demo", "--trigger", "calcutta", "--task",
                "hello", "--cron", "0 9 * * *", "--timezone", "Asia/Calcutta", "--json",
                "--database-url", ws.url)
    assert result.code == 0, result.err
    assert json.loads(result.out)["timezone"] == "Asia/Kolkata"


def test_db_migrate_and_check_on_a_ready_database(
    ql: Callable[..., Result], ws: Workspace
) -> None:
    before = dump(ws.db)
    migrated = ql("db", "migrate", "--json", "--database-url", ws.url)
    assert migrated.code == 0, migrated.err
    assert json.loads(migrated.out) == {"applied": [], "current": SQLITE_MIGRATIONS[-1].id}
    checked = ql("db", "check", "--database-url", ws.url)
    assert (checked.code, checked.out) == (0, "ready\n")
    assert dump(ws.db) == before


def test_environment_url_is_used_when_no_option_is_given(
    ql: Callable[..., Result], ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QL_DATABASE_URL", ws.url)
    result = ql("project", "list", "--json")
    assert result.code == 0, result.err
    assert {r["id"] for r in json.loads(result.out)} == {"demo", "old"}

