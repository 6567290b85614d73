"""`ql apply`, `ql export` and `ql import crontab` as a user drives them.

In-process on SQLite: a first apply creates, a second one is a no-op (the database is byte
for byte the same), `--dry-run` prints the diff field by field and writes nothing, `--prune`
disables (never deletes) what the files no longer name, a broken file (or a state the store
would refuse) writes nothing and names file, line and field, `ql export` then `ql apply` is a
no-op (and rebuilds the same definitions in a fresh database), and a crontab becomes tasks
and triggers with stable ids. One case runs the same cycle on PostgreSQL as ql_admin.
"""

from __future__ import annotations

import hashlib
import json
import os
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.test_cli_errors import Result, dump, ql  # noqa: F401
from tests.support.pg import PgTestDatabase

Ql = Callable[..., Result]

JOBS = """\
apiVersion: qinglong/v1
project: demo
name: Demo project
tasks:
  hello:
    shell: echo hello
  backup:
    name: Nightly backup
    argv: [/bin/echo, backup, --all]
    env:
      BUCKET: nightly
      TOKEN: {from_env: APPLY_TEST_TOKEN}
    cwd: /tmp
    timeout: 30m
    retry:
      max_attempts: 3
      backoff: 30s
      on_exit: [1, 75]
    idempotent: true
    concurrency: 2
triggers:
  every-minute:
    task: hello
    cron: "* * * * *"
    timezone: UTC
  nightly:
    task: backup
    cron: "0 3 * * *"
    timezone: Asia/Shanghai
    misfire: fire_once
    overlap: queue
    overlap_queue_limit: 2
"""
SECRET = "t0ken-never-printed"


@pytest.fixture
def db(ql: Ql, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Ql:  # noqa: F811
    """``ql`` on a fresh migrated SQLite database (working directory: tmp_path)."""
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    monkeypatch.setenv("APPLY_TEST_TOKEN", SECRET)
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'ql.db'}"

    def run(*argv: str) -> Result:
        return ql(*argv, "--database-url", url)

    assert run("db", "migrate").code == 0
    return run


def write(path: Path, text: str) -> str:
    """Write ``text`` (dedented); the path relative to the working directory (tmp_path)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return os.path.relpath(path)


def ok(result: Result) -> Result:
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    return result


def as_json(result: Result) -> object:
    return json.loads(ok(result).out)


def database(tmp_path: Path) -> list[str]:
    return dump(tmp_path / "ql.db")


# --- apply, and apply again --------------------------------------------------------------


def test_apply_creates_everything_and_a_second_apply_writes_nothing(db: Ql, tmp_path: Path) -> None:
    jobs = write(tmp_path / "jobs.yaml", JOBS)
    first = ok(db("apply", "-f", jobs))
    assert "project demo: created" in first.out
    assert "task demo/backup: created (revision 1)" in first.out
    assert "trigger demo/nightly: created (revision 1)" in first.out
    assert first.out.rstrip().endswith("applied: 5 created; 0 unchanged")
    assert SECRET not in first.out + first.err
    shown = as_json(db("task", "show", "--project", "demo", "--task", "backup", "--json"))
    assert isinstance(shown, dict)
    assert shown["name"] == "Nightly backup"
    assert shown["command"] == {"kind": "argv", "argv": ["/bin/echo", "backup", "--all"]}
    assert shown["environment"] == ["BUCKET", "TOKEN"]
    assert (shown["working_directory"], shown["timeout_ms"]) == ("/tmp", 30 * 60_000)
    assert shown["retry"] == {"max_attempts": 3, "backoff_ms": 30_000, "max_backoff_ms": 600_000,
                              "on_exit_codes": [1, 75], "on_timeout": False}
    assert (shown["idempotent"], shown["concurrency"]) == (True, 2)
    [nightly] = [t for t in as_json(db("trigger", "list", "--project", "demo", "--json"))  # type: ignore[attr-defined]
                 if t["trigger"] == "nightly"]
    assert (nightly["cron"], nightly["timezone"], nightly["misfire"]) == (
        "0 3 * * *", "Asia/Shanghai", "fire_once")
    assert (nightly["overlap"], nightly["overlap_queue_limit"], nightly["enabled"]) == (
        "queue", 2, True)

    before = database(tmp_path)
    again = ok(db("apply", "-f", jobs))
    assert database(tmp_path) == before  # not one row written
    for line in ("task demo/backup: unchanged (revision 1)",
                 "task demo/hello: unchanged (revision 1)",
                 "trigger demo/every-minute: unchanged (revision 1)",
                 "trigger demo/nightly: unchanged (revision 1)"):
        assert line in again.out
    assert again.out.rstrip().endswith("nothing to change: 4 unchanged")


def test_from_env_reads_the_environment_and_keeps_the_stored_value_without_it(
        db: Ql, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = write(tmp_path / "jobs.yaml", JOBS)
    monkeypatch.delenv("APPLY_TEST_TOKEN")
    refused = db("apply", "-f", jobs)
    assert refused.code == 2
    assert refused.err.splitlines()[0] == (
        "jobs.yaml:12: tasks.backup.env.TOKEN.from_env: $APPLY_TEST_TOKEN is not set in the "
        "environment of ql apply, and the task has no stored value for TOKEN")
    assert "nothing was written" in refused.err
    monkeypatch.setenv("APPLY_TEST_TOKEN", SECRET)
    ok(db("apply", "-f", jobs))
    monkeypatch.delenv("APPLY_TEST_TOKEN")
    kept = ok(db("apply", "-f", jobs))  # unset now: the stored value is kept
    assert "task demo/backup: unchanged" in kept.out
    monkeypatch.setenv("APPLY_TEST_TOKEN", "rotated-" + SECRET)
    rotated = ok(db("apply", "-f", jobs))
    assert "task demo/backup: changed (revision 2)\n    env.TOKEN: (secret) -> (changed)\n" in rotated.out
    assert SECRET not in rotated.out + rotated.err


# --- dry run -------------------------------------------------------------------------------


def test_dry_run_prints_the_diff_field_by_field_and_writes_nothing(db: Ql, tmp_path: Path) -> None:
    fresh = write(tmp_path / "jobs.yaml", JOBS)
    planned = ok(db("apply", "-f", fresh, "--dry-run"))
    assert "project demo: would create" in planned.out
    assert "task demo/hello: would create\n    shell: \"echo hello\"\n" in planned.out
    assert planned.out.rstrip().endswith(
        "dry run: would create 5; 0 unchanged; nothing was written")
    assert db("task", "list", "--project", "demo").code == 2  # not even the project exists
    ok(db("apply", "-f", fresh))

    edited = JOBS.replace("timeout: 30m", "timeout: 1h30m").replace(
        '"0 3 * * *"', '"30 3 * * *"').replace("BUCKET: nightly", "BUCKET: weekly").replace(
        "    shell: echo hello\n", "    shell: echo hello\n    enabled: false\n").replace(
        '    timezone: UTC\n', '    timezone: UTC\n    enabled: false\n')
    changed = write(tmp_path / "edited.yaml", edited)
    before = database(tmp_path)
    diff = ok(db("apply", "-f", changed, "--dry-run"))
    assert database(tmp_path) == before
    assert diff.out == textwrap.dedent("""\
        trigger demo/every-minute: would disable (now revision 1)
            enabled: true -> false
        task demo/backup: would change (now revision 1)
            timeout: "30m" -> "1h30m"
            env.BUCKET: (set) -> (changed)
        task demo/hello: would disable (now revision 1)
            enabled: true -> false
        trigger demo/nightly: would change (now revision 1)
            cron: "0 3 * * *" -> "30 3 * * *"
        dry run: would change 2, disable 2; 0 unchanged; nothing was written
        """)
    planned_json = as_json(db("apply", "-f", changed, "--dry-run", "--json"))
    assert isinstance(planned_json, dict)
    assert planned_json["dry_run"] is True
    assert planned_json["counts"]["change"] == 2  # type: ignore[index]
    by_id = {c["id"]: c for c in planned_json["changes"]}  # type: ignore[attr-defined]
    assert by_id["nightly"]["fields"] == [{"field": "cron", "from": "0 3 * * *",
                                           "to": "30 3 * * *"}]
    assert by_id["backup"]["source"] == "edited.yaml:8"
    assert database(tmp_path) == before

    applied = ok(db("apply", "-f", changed))
    assert "trigger demo/nightly: changed (revision 2)" in applied.out  # one revision, not two
    states = {t["trigger"]: t["state"]
              for t in as_json(db("trigger", "list", "--project", "demo", "--json"))}  # type: ignore[attr-defined]
    assert states == {"every-minute": "disabled", "nightly": "firing"}
    assert ok(db("apply", "-f", changed)).out.rstrip().endswith("nothing to change: 4 unchanged")


# --- prune ---------------------------------------------------------------------------------


def test_prune_disables_what_the_files_no_longer_name_and_deletes_nothing(
        db: Ql, tmp_path: Path) -> None:
    jobs = write(tmp_path / "jobs.yaml", JOBS)
    ok(db("apply", "-f", jobs))
    ok(db("task", "publish", "--project", "demo", "--task", "extra", "--shell", "echo extra"))
    ok(db("trigger", "publish", "--project", "demo", "--trigger", "extra-t", "--task", "extra",
          "--cron", "0 * * * *", "--timezone", "UTC"))
    ok(db("project", "create", "other"))
    ok(db("task", "publish", "--project", "other", "--task", "x", "--shell", "echo x"))

    kept = ok(db("apply", "-f", jobs))
    assert ("trigger demo/extra-t: not in the files, left as it is (--prune disables it) "
            "(revision 1)") in kept.out
    assert kept.out.rstrip().endswith("nothing to change: 4 unchanged, 2 not in the files")

    before = database(tmp_path)
    planned = ok(db("apply", "-f", jobs, "--prune", "--dry-run"))
    assert database(tmp_path) == before
    assert ("trigger demo/extra-t: would disable (now revision 1; --prune: no longer in the "
            "files)\n    enabled: true -> false\n") in planned.out
    assert "task demo/extra: would disable" in planned.out

    pruned = ok(db("apply", "-f", jobs, "--prune"))
    assert "trigger demo/extra-t: disabled (revision 2; --prune: no longer in the files)" in pruned.out
    assert "task demo/extra: disabled (revision 2; --prune: no longer in the files)" in pruned.out
    tasks = {t["task"]: t for t in as_json(db("task", "list", "--project", "demo", "--json"))}  # type: ignore[attr-defined]
    assert tasks["extra"]["enabled"] is False and tasks["extra"]["deleted"] is False
    triggers = {t["trigger"]: t["state"]
                for t in as_json(db("trigger", "list", "--project", "demo", "--json"))}  # type: ignore[attr-defined]
    assert triggers["extra-t"] == "disabled"
    # projects the files do not name are never touched
    assert as_json(db("task", "list", "--project", "other", "--json"))[0]["enabled"] is True  # type: ignore[index]
    assert "nothing to change" in ok(db("apply", "-f", jobs, "--prune")).out


# --- a bad file writes nothing ---------------------------------------------------------------


def test_a_broken_file_writes_nothing_and_names_file_line_and_field(db: Ql, tmp_path: Path) -> None:
    ok(db("apply", "-f", write(tmp_path / "defs" / "a.yaml", JOBS)))
    # a.yaml now changes a task, b.yml is broken: nothing of either may be written
    write(tmp_path / "defs" / "a.yaml", JOBS.replace("timeout: 30m", "timeout: 45m"))
    write(tmp_path / "defs" / "b.yml", """\
        apiVersion: qinglong/v1
        project: demo
        tasks:
          report:
            shell: echo report
            timeout: 30
            tiemout: 5s
          ship:
            argv: [bin/ship]
            env:
              QL_X: a
              PORT: [8080]
        triggers:
          weekly:
            task: report
            cron: "0 3 * *"
            timezone: Mars/Olympus
    """)
    write(tmp_path / "defs" / "notes.txt", "not a definitions file")
    before = database(tmp_path)
    refused = db("apply", "-f", "defs")
    assert refused.code == 2, refused.err
    assert database(tmp_path) == before
    assert refused.out == ""
    assert refused.err.splitlines() == [
        "defs/b.yml:6: tasks.report.timeout: must be a duration with a unit, e.g. 30s, 5m, 1h30m",
        ("defs/b.yml:7: tasks.report.tiemout: unknown key (expected one of name, shell, bash, "
         "argv, script, interpreter, args, env, cwd, timeout, retry, idempotent, concurrency, "
         "requires, limits, parameters, enabled)"),
        "defs/b.yml:9: tasks.ship.argv[0]: must be an absolute path",
        "defs/b.yml:11: tasks.ship.env.QL_X: name 'QL_X' uses the reserved prefix QL_",
        ("defs/b.yml:12: tasks.ship.env.PORT: must be a string, {from_env: VARIABLE} or "
         "{secret: stored}, not a list"),
        "defs/b.yml:16: triggers.weekly.cron: must have 5 fields (or 6 with seconds first), got 4",
        "defs/b.yml:17: triggers.weekly.timezone: unknown IANA time zone 'Mars/Olympus'",
        "ql: 7 problems in the definitions; nothing was written",
    ]
    as_problem = db("apply", "-f", "defs", "--json")
    assert as_problem.code == 2
    error = json.loads(as_problem.err)["error"]
    assert error["code"] == "QL_INVALID_INPUT"
    assert error["issues"][0] == {
        "file": "defs/b.yml", "line": 6, "field": "tasks.report.timeout",
        "message": "must be a duration with a unit, e.g. 30s, 5m, 1h30m",
        "text": "defs/b.yml:6: tasks.report.timeout: must be a duration with a unit, e.g. 30s, "
                "5m, 1h30m"}
    assert database(tmp_path) == before


@pytest.mark.parametrize(("text", "expected"), [
    ("apiVersion: qinglong/v1\nproject: demo\ntasks:\n  a:\n    shell: [unclosed\n",
     ("bad.yaml:5: not valid YAML: expected ',' or ']', but got '<stream end>' (while parsing "
     "a flow sequence at line 5)")),
    ("project: demo\n", "bad.yaml:1: apiVersion: is required: write apiVersion: qinglong/v1 first"),
    ("apiVersion: qinglong/v2\nproject: demo\n",
     "bad.yaml:1: apiVersion: must be qinglong/v1 (got 'qinglong/v2')"),
    ("apiVersion: qinglong/v1\nproject: Demo\n",
     ("bad.yaml:2: project: must be 1-128 characters of lowercase letters, digits and '-', "
     "starting and ending with a letter or digit")),
    ("apiVersion: qinglong/v1\nproject: demo\ntasks:\n  a:\n    shell: x\n    shell: y\n",
     "bad.yaml:6: shell: is given twice (first at line 5)"),
    ("apiVersion: qinglong/v1\nproject: demo\ntasks:\n  a:\n    shell: x\n    argv: [/bin/x]\n",
     "bad.yaml:6: tasks.a.argv: give one of shell, argv or script"),
    (("apiVersion: qinglong/v1\nproject: demo\ntasks:\n  a: {shell: x}\ntriggers:\n"
     "  t: {task: b, cron: '* * * * *', timezone: UTC}\n"),
     ("bad.yaml:6: triggers.t.task: task 'b' is not defined in project 'demo' (define it under "
     "tasks)")),
    (("apiVersion: qinglong/v1\nproject: demo\ntasks:\n  a:\n    shell: x\n    retry:\n"
     "      backoff: 1m\n      max_backoff: 10s\n"),
     "bad.yaml:8: tasks.a.retry.max_backoff: must not be shorter than the first backoff"),
    ("apiVersion: qinglong/v1\nproject: demo\ntasks:\n  a:\n    shell: x\n    concurrency: 0\n",
     "bad.yaml:6: tasks.a.concurrency: must be between 1 and 10000"),
    ("apiVersion: qinglong/v1\nproject: demo\ntasks:\n  a:\n    shell: x\n    cwd: /no/such/dir\n",
     ("bad.yaml:6: tasks.a.cwd: directory '/no/such/dir' does not exist on this host (commands "
     "of the SQLite profiles run here)")),
])
def test_each_problem_names_its_line_and_field(db: Ql, tmp_path: Path, text: str,
                                                expected: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    before = database(tmp_path)
    refused = db("apply", "-f", "bad.yaml")
    assert refused.code == 2
    assert refused.err.splitlines()[0] == expected
    assert database(tmp_path) == before


def test_states_the_store_would_refuse_are_found_before_anything_is_written(
        db: Ql, tmp_path: Path) -> None:
    jobs = write(tmp_path / "jobs.yaml", JOBS)
    ok(db("apply", "-f", jobs))
    before = database(tmp_path)
    # a trigger moved to another task, plus an enabled trigger of a disabled task, plus a
    # valid change to hello: the valid change is not written either
    moved = JOBS.replace("    task: backup\n", "    task: hello\n").replace(
        "    argv: [/bin/echo, backup, --all]\n",
        "    argv: [/bin/echo, backup, --all]\n    enabled: false\n").replace(
        "shell: echo hello", "shell: echo bonjour")
    moved += "  daily:\n    task: backup\n    cron: '0 0 * * *'\n    timezone: UTC\n"
    refused = db("apply", "-f", write(tmp_path / "moved.yaml", moved))
    assert refused.code == 2
    assert refused.err.splitlines() == [
        ("moved.yaml:28: triggers.nightly.task: trigger 'nightly' is bound to task 'backup' for "
        "life; give the trigger a new id to run 'hello'"),
        ("moved.yaml:34: triggers.daily.enabled: task 'backup' is disabled (enabled: false), so "
        "this trigger cannot be published enabled: set enabled: false here too, or enable the "
        "task"),
        "ql: 2 problems in the definitions; nothing was written",
    ]
    assert database(tmp_path) == before
    ok(db("project", "archive", "demo"))
    archived = db("apply", "-f", jobs)
    assert archived.err.splitlines()[0] == (
        "jobs.yaml:2: project: project 'demo' is archived; unarchive it first "
        "(ql project unarchive demo)")


def test_a_deleted_trigger_is_restored_and_a_stale_pin_is_re_pinned(db: Ql, tmp_path: Path) -> None:
    jobs = write(tmp_path / "jobs.yaml", JOBS)
    ok(db("apply", "-f", jobs))
    ok(db("trigger", "delete", "--project", "demo", "--trigger", "every-minute"))
    ok(db("task", "publish", "--project", "demo", "--task", "backup", "--timeout", "1m",
          "--no-repin"))
    applied = ok(db("apply", "-f", jobs))
    assert "trigger demo/every-minute: restored (revision 3)\n    enabled: false -> true\n" in (
        applied.out)
    # backup goes back to 30m: a new revision that re-pins nightly with it
    assert "task demo/backup: changed (revision 3)" in applied.out
    assert "re-pinned triggers: nightly" in applied.out
    states = {t["trigger"]: t["state"]
              for t in as_json(db("trigger", "list", "--project", "demo", "--json"))}  # type: ignore[attr-defined]
    assert states == {"every-minute": "firing", "nightly": "firing"}
    ok(db("task", "publish", "--project", "demo", "--task", "hello", "--shell", "echo hello",
          "--timeout", "2m", "--no-repin"))
    ok(db("task", "publish", "--project", "demo", "--task", "hello", "--timeout", "1h",
          "--no-repin"))  # back to what the file says, but every-minute is left behind
    repinned = ok(db("apply", "-f", jobs))
    assert ("trigger demo/every-minute: changed (revision 4)\n"
            "    pin: \"task revision 1\" -> \"the task's current revision\"\n") in repinned.out
    assert "nothing to change" in ok(db("apply", "-f", jobs)).out


# --- files and documents --------------------------------------------------------------------


def test_a_directory_of_files_and_documents_adds_up_to_one_project(db: Ql, tmp_path: Path) -> None:
    write(tmp_path / "defs" / "10-tasks.yaml", """\
        apiVersion: qinglong/v1
        project: demo
        tasks:
          hello: {shell: echo hello}
        ---
        apiVersion: qinglong/v1
        project: ops
        tasks:
          disk: {argv: [/bin/df, -h]}
    """)
    write(tmp_path / "defs" / "20-triggers.yml", """\
        apiVersion: qinglong/v1
        project: demo
        triggers:
          hourly: {task: hello, cron: '0 * * * *', timezone: Europe/Berlin}
    """)
    applied = ok(db("apply", "-f", "defs"))
    assert "project ops: created" in applied.out
    assert "trigger demo/hourly: created (revision 1)" in applied.out
    write(tmp_path / "defs" / "30-dup.yaml", """\
        apiVersion: qinglong/v1
        project: demo
        tasks:
          hello: {shell: echo again}
    """)
    twice = db("apply", "-f", "defs")
    assert twice.err.splitlines()[0] == (
        "defs/30-dup.yaml:4: tasks.hello: task 'hello' is defined twice (also at "
        "defs/10-tasks.yaml:4)")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert db("apply", "-f", "empty").err.splitlines()[0] == (
        "empty: the directory holds no *.yaml or *.yml file")


# --- export ---------------------------------------------------------------------------------


RICH = """\
apiVersion: qinglong/v1
project: rich
name: Every option
tasks:
  multi:
    shell: |
      set -e
      echo "one  two"
      echo '50%'
    bash: true
    env:
      EMPTY: ''
      QUOTED: "a: b # c"
    timeout: 1h30m500ms
    retry: {max_attempts: 5, backoff: 1s, max_backoff: 1m, on_timeout: true}
  spaced:
    argv: [/bin/echo, "two  spaces", "", "--flag=x"]
    cwd: /tmp
    concurrency: 3
    idempotent: true
  off:
    shell: "true"
    enabled: false
triggers:
  dst:
    task: multi
    cron: "30 2 * * SUN"
    timezone: US/Eastern
    overlap: cancel_previous
  off-t:
    task: off
    cron: "0 0 1 * *"
    timezone: UTC
    enabled: false
  queued:
    task: spaced
    cron: "*/10 * * * * *"
    timezone: Etc/GMT-8
    overlap: queue
    overlap_queue_limit: 0
    misfire: fire_once
"""


def test_export_then_apply_is_a_no_op_and_rebuilds_the_same_definitions(
        db: Ql, ql: Ql, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    ok(db("apply", "-f", write(tmp_path / "jobs.yaml", JOBS)))
    ok(db("apply", "-f", write(tmp_path / "rich.yaml", RICH)))
    ok(db("task", "publish", "--project", "demo", "--task", "cli", "--shell", "echo cli",
          "--env", "K=v"))
    ok(db("task", "delete", "--project", "demo", "--task", "cli"))  # deleted: not exported
    exported = ok(db("export", "-o", "all.yaml"))
    assert exported.out == "wrote 2 project(s), 5 task(s) and 5 trigger(s) to all.yaml\n"
    text = (tmp_path / "all.yaml").read_text()
    assert SECRET not in text  # a secret ({from_env: ...}) is never written
    assert "TOKEN: {secret: stored}" in text
    assert "      BUCKET: nightly\n" in text and "QUOTED: 'a: b # c'" in text  # plain values
    assert "timezone: America/New_York" in text  # stored canonical
    assert ok(db("export")).out == text  # standard output: the same

    before = database(tmp_path)
    again = ok(db("apply", "-f", "all.yaml"))
    assert again.out.rstrip().endswith("nothing to change: 10 unchanged")
    assert database(tmp_path) == before
    assert "nothing would change" in ok(db("apply", "-f", "all.yaml", "--dry-run")).out

    # into an empty database, with the secret given again: the same definitions
    monkeypatch.setenv("TOKEN", SECRET)
    (tmp_path / "given.yaml").write_text(text.replace("{secret: stored}", "{from_env: TOKEN}"))
    other = f"sqlite:///{tmp_path / 'other.db'}"
    ok(ql("db", "migrate", "--database-url", other))
    ok(ql("apply", "-f", "given.yaml", "--database-url", other))
    assert ok(ql("export", "--database-url", other)).out == text
    for project, task in (("demo", "backup"), ("rich", "multi"), ("rich", "spaced")):
        one, two = (as_json(run("task", "show", "--project", project, "--task", task, "--json"))
                    for run in (db, lambda *a: ql(*a, "--database-url", other)))
        assert isinstance(one, dict) and isinstance(two, dict)
        assert one["content_digest"] == two["content_digest"]  # values included in the digest

    only = ok(db("export", "--project", "rich")).out
    assert "project: rich" in only and "project: demo" not in only
    ok(db("project", "archive", "demo"))
    skipped = ok(db("export"))
    assert "project: demo" not in skipped.out
    assert "note: project 'demo' is archived and was left out" in skipped.err


# --- crontab --------------------------------------------------------------------------------

CRONTAB = """\
# m h dom mon dow command
MAILTO=""
PATH=/usr/local/bin:/usr/bin:/bin
SHELL=/bin/bash

*/5 * * * * /usr/local/bin/poll --quiet
0 3 * * mon-fri  tar czf /backup/home-$(date +\\%F).tgz /home
@hourly echo tick
@hourly echo tick
CRON_TZ=America/New_York
30 8 * * * echo good morning
"""


def cron_id(expression: str, command: str) -> str:
    return "cron-" + hashlib.sha256(f"{expression}\n{command}".encode()).hexdigest()[:10]


def test_a_crontab_becomes_tasks_and_triggers_with_stable_ids(db: Ql, tmp_path: Path) -> None:
    write(tmp_path / "crontab", CRONTAB)
    args = ("import", "crontab", "crontab", "--project", "legacy", "--timezone", "Asia/Shanghai")
    planned = ok(db(*args, "--dry-run"))
    assert planned.out.rstrip().endswith("dry run: would create 11; 0 unchanged; nothing was written")
    assert db("task", "list", "--project", "legacy").code == 2
    ok(db(*args))
    tar = cron_id("0 3 * * MON-FRI", "tar czf /backup/home-$(date +%F).tgz /home")
    tick = cron_id("0 * * * *", "echo tick")
    morning = cron_id("30 8 * * *", "echo good morning")
    tasks = {t["task"]: t for t in as_json(db("task", "list", "--project", "legacy", "--json"))}  # type: ignore[attr-defined]
    assert set(tasks) == {cron_id("*/5 * * * *", "/usr/local/bin/poll --quiet"), tar, tick,
                          f"{tick}-2", morning}
    assert tasks[tar]["command"] == {"kind": "shell", "shell": "/bin/bash",
                                     "command": "tar czf /backup/home-$(date +%F).tgz /home"}
    assert tasks[tar]["environment"] == ["PATH"]  # MAILTO configures cron, not the job
    triggers = {t["trigger"]: t for t in as_json(db("trigger", "list", "--project", "legacy", "--json"))}  # type: ignore[attr-defined]
    assert (triggers[tar]["cron"], triggers[tar]["timezone"]) == ("0 3 * * MON-FRI", "Asia/Shanghai")
    assert triggers[tick]["cron"] == "0 * * * *"
    assert triggers[morning]["timezone"] == "America/New_York"
    assert all(t["task"] == name for name, t in triggers.items())

    before = database(tmp_path)
    again = ok(db(*args))
    assert again.out.rstrip().endswith("nothing to change: 10 unchanged")
    assert database(tmp_path) == before

    # an edited command is a new job; --prune disables the old one
    write(tmp_path / "crontab", CRONTAB.replace("echo good morning", "echo good day"))
    pruned = ok(db(*args, "--prune"))
    assert f"trigger legacy/{morning}: disabled (revision 2; --prune" in pruned.out
    assert f"task legacy/{cron_id('30 8 * * *', 'echo good day')}: created" in pruned.out

    exported = ok(db(*args, "-o", "legacy.yaml"))
    assert exported.out == "wrote 5 task(s) and 5 trigger(s) of project legacy to legacy.yaml\n"
    assert "nothing to change" in ok(db("apply", "-f", "legacy.yaml")).out


def test_bad_crontab_lines_are_named_by_number_and_nothing_is_written(db: Ql,
                                                                      tmp_path: Path) -> None:
    write(tmp_path / "crontab", """\
        FOO=1
        61 * * * * x
        @reboot y
        bad line
        * * * * * echo 50%
        QL_X=1
        SHELL=/bin/zsh
        @daily
    """)
    before = database(tmp_path)
    refused = db("import", "crontab", "crontab", "--project", "legacy", "--timezone", "UTC")
    assert refused.code == 2
    assert refused.err.splitlines() == [
        "crontab:2: schedule: the minute field '61': a value must be between 0 and 59 (got 61)",
        ("crontab:3: schedule: @reboot runs at boot; qinglong has no boot trigger (run it from "
        "your init system)"),
        ("crontab:4: not a crontab line: expected five cron fields and a command, an @macro and "
        "a command, or NAME=value"),
        ("crontab:5: command: an unescaped % is cron's 'the rest is standard input'; write \\% "
        "for a literal %, or pipe the input in (printf ... | command)"),
        "crontab:6: QL_X: name 'QL_X' uses the reserved prefix QL_",
        "crontab:7: SHELL: only /bin/sh and /bin/bash are supported",
        "crontab:8: command: is missing after the schedule",
        "ql: 7 problems in the definitions; nothing was written",
    ]
    assert database(tmp_path) == before
    zone = db("import", "crontab", "crontab", "--project", "legacy", "--timezone", "Mars/Base")
    assert zone.code == 2 and zone.err.startswith("ql: --timezone: ")


# --- PostgreSQL --------------------------------------------------------------------------------


def test_apply_export_and_import_on_postgresql(ql: Ql, pg_db: PgTestDatabase,  # noqa: F811
                                               tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    monkeypatch.setenv("APPLY_TEST_TOKEN", SECRET)
    monkeypatch.chdir(tmp_path)
    admin = pg_db.url("ql_admin")

    def run(*argv: str) -> Result:
        return ql(*argv, "--database-url", admin)

    jobs = write(tmp_path / "jobs.yaml", JOBS.replace("    cwd: /tmp\n", "    cwd: /srv/none\n"))
    created = ok(run("apply", "-f", jobs))  # a cwd is not checked here: workers run it
    assert created.out.rstrip().endswith("applied: 5 created; 0 unchanged")
    assert ok(run("apply", "-f", jobs)).out.rstrip().endswith("nothing to change: 4 unchanged")

    ok(run("task", "publish", "--project", "demo", "--task", "extra", "--shell", "echo x"))
    edited = write(tmp_path / "edited.yaml", JOBS.replace('"0 3 * * *"', '"15 4 * * *"'))
    planned = ok(run("apply", "-f", edited, "--prune", "--dry-run"))
    assert "trigger demo/nightly: would change (now revision 1)\n" \
           "    cron: \"0 3 * * *\" -> \"15 4 * * *\"\n" in planned.out
    assert "task demo/extra: would disable" in planned.out
    applied = ok(run("apply", "-f", edited, "--prune"))
    assert "task demo/extra: disabled (revision 2; --prune: no longer in the files)" in applied.out

    broken = write(tmp_path / "broken.yaml", JOBS.replace('"* * * * *"', '"* * * *"'))
    refused = run("apply", "-f", broken)
    assert refused.code == 2
    assert refused.err.splitlines()[0] == (
        "broken.yaml:24: triggers.every-minute.cron: must have 5 fields (or 6 with seconds "
        "first), got 4")

    text = ok(run("export")).out
    (tmp_path / "all.yaml").write_text(text)
    assert ok(run("apply", "-f", "all.yaml")).out.rstrip().endswith(
        "nothing to change: 5 unchanged")

    write(tmp_path / "crontab", CRONTAB)
    imported = ok(run("import", "crontab", "crontab", "--project", "legacy",
                      "--timezone", "UTC"))
    assert imported.out.rstrip().endswith("applied: 11 created; 0 unchanged")
    assert "nothing to change" in ok(run("import", "crontab", "crontab", "--project", "legacy",
                                         "--timezone", "UTC")).out
    # ql_runtime reads definitions (an unchanged apply needs nothing more) but never publishes:
    # the first write is refused, and the report says that nothing was written
    runtime = pg_db.url("ql_runtime")
    assert "nothing to change" in ok(ql("apply", "-f", "all.yaml", "--database-url", runtime)).out
    stopped = ql("apply", "-f", write(tmp_path / "slower.yaml", text.replace(
        "timeout: 30m", "timeout: 45m")), "--database-url", runtime)
    assert stopped.code == 2, stopped.err
    first, second = stopped.err.splitlines()
    assert first.startswith("ql: apply stopped at task demo/backup (slower.yaml:")
    assert second.startswith("ql: project demo was rolled back whole; 0 change(s) of the "
                             "projects before it were written and 1 were not;")
    assert "nothing to change" in ok(run("apply", "-f", "all.yaml")).out


@pytest.mark.parametrize("path", [("apply",), ("export",), ("import",), ("import", "crontab")])
def test_help(ql: Ql, path: tuple[str, ...]) -> None:  # noqa: F811
    result = ql(*path, "--help")
    assert result.code == 0 and result.err == ""
    assert result.out.startswith("Usage: ql " + " ".join(path))
