"""Run now from the command line: `ql task run` and `ql trigger fire`.

In-process (fast): what a user sees -- the Run admitted and its request id, a retry that
finds it (exit 0), a reused request id refused, refusals that write nothing, who asked in
`ql run list` and `ql run show`. Real processes (slow): a `ql serve` runs a Run another
`ql task run` process admitted, and a cluster `ql worker` (woken by NOTIFY, its poll set to a
minute) runs one admitted as ql_runtime; `ql audit` stays clean on both.
"""

from __future__ import annotations

import getpass
import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from testkit.cluster import Worker
from tests.e2e.test_cli_errors import Result, assert_one_line_error, dump, ql  # noqa: F401
from tests.support.pg import PgTestDatabase
from tests.support.ql import Ql, wait_for
from tests.support.ql_process import run_ql

RUN_TASK = ("task", "run", "--project", "demo", "--task", "hello")
FIRE = ("trigger", "fire", "--project", "demo", "--trigger", "t1")


@pytest.fixture
def db(ql: Callable[..., Result], tmp_path: Path,  # noqa: F811
       monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """``ql`` on a migrated database: project demo, task hello, trigger t1 (yearly, skip)."""
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    monkeypatch.delenv("QL_ACTOR", raising=False)
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'ql.db'}"

    def run(*argv: str) -> Result:
        return ql(*argv, "--database-url", url)

    for step in (("db", "migrate"), ("project", "create", "demo"),
                 ("task", "publish", "--project", "demo", "--task", "hello", "--shell", "echo hi"),
                 ("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
                  "--cron", "0 0 1 1 *", "--timezone", "UTC", "--overlap", "skip")):
        done = run(*step)
        assert done.code == 0, done.err
    return run


def as_json(result: Result) -> dict[str, object]:
    assert result.code == 0, result.err
    value = json.loads(result.out)
    assert isinstance(value, dict)
    return value


def test_task_run_admits_a_run_and_a_retry_finds_it(db: Callable[..., Result]) -> None:
    first = db(*RUN_TASK, "--request-id", "deploy-42", "--actor", "alice")
    assert first.code == 0, first.err
    lines = first.out.splitlines()
    assert lines[0].startswith("admitted run ") and "requested by alice" in lines[0], lines
    run_id = lines[0].split()[2]
    assert "--request-id deploy-42" in lines[1]
    again = db(*RUN_TASK, "--request-id", "deploy-42", "--actor", "alice")
    assert again.code == 0, again.err
    assert again.out.startswith(f"already admitted: run {run_id} ")
    assert "nothing new was admitted" in again.out
    listed = json.loads(db("run", "list", "--json").out)
    assert [r["id"] for r in listed] == [run_id]
    shown = as_json(db("run", "show", run_id, "--json"))
    run = shown["run"]
    assert isinstance(run, dict)
    assert (run["trigger_type"], run["origin"], run["requested_by"], run["request_id"],
            run["trigger"]) == ("manual", "manual_user", "alice", "deploy-42", None)
    events = shown["events"]
    assert isinstance(events, list)
    assert [(e["type"], e["actor"]) for e in events] == [
        ("run.created", "user:alice"), ("run.queued", "user:alice")]


def test_json_output_and_who_asked_by_default(db: Callable[..., Result],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fired = as_json(db(*FIRE, "--json"))
    assert fired["admitted"] is True and fired["trigger"] == "t1"
    assert fired["requested_by"] == getpass.getuser()  # the OS user when nobody says
    assert len(str(fired["request_id"])) == 36  # a fresh UUID
    monkeypatch.setenv("QL_ACTOR", "ci-bot")
    by_env = as_json(db(*RUN_TASK, "--json"))
    assert (by_env["requested_by"], by_env["trigger"], by_env["admission_lag_ms"]) == (
        "ci-bot", None, None)
    again = as_json(db(*FIRE, "--json", "--request-id", str(fired["request_id"])))
    assert (again["admitted"], again["id"]) == (False, fired["id"])
    table = db("run", "list").out.splitlines()
    assert table[0].split()[-1] == "ORIGIN"
    assert sorted(line.split()[-1] for line in table[1:]) == sorted(
        [f"manual:{getpass.getuser()}", "manual:ci-bot"])
    text = db("run", "show", str(by_env["id"])).out
    assert "trigger    demo/- (run now of the task)" in text
    assert "origin     manual, requested by ci-bot (request id " in text


def test_refusals_exit_2_and_write_nothing(db: Callable[..., Result], tmp_path: Path) -> None:
    assert db(*RUN_TASK, "--request-id", "used").code == 0
    assert db("task", "publish", "--project", "demo", "--task", "off", "--shell", "true",
              "--disabled").code == 0
    assert db("trigger", "publish", "--project", "demo", "--trigger", "stopped", "--task",
              "hello", "--cron", "0 0 1 1 *", "--timezone", "UTC", "--disabled").code == 0
    assert db("project", "create", "old").code == 0
    assert db("task", "publish", "--project", "old", "--task", "x", "--shell", "true").code == 0
    assert db("project", "archive", "old").code == 0
    before = dump(tmp_path / "ql.db")
    cases = [
        ((*FIRE, "--request-id", "used"), ["'used'", "task hello", "new request id"]),
        (("task", "run", "--project", "demo", "--task", "off"), ["demo/off", "disabled"]),
        (("trigger", "fire", "--project", "demo", "--trigger", "stopped"), ["disabled"]),
        (("task", "run", "--project", "old", "--task", "x"), ["archived"]),
        (("task", "run", "--project", "demo", "--task", "nope"), ["'nope'", "not found"]),
        (("trigger", "fire", "--project", "demo", "--trigger", "nope"), ["'nope'"]),
        (("task", "run", "--project", "nope", "--task", "hello"), ["'nope'"]),
        ((*RUN_TASK, "--request-id", "has space"), ["--request-id"]),
        ((*RUN_TASK, "--actor", " padded"), ["--actor"]),
        (("task", "run", "--project", "Demo", "--task", "hello"), ["--project"]),
        (("task", "run", "--project", "demo"), ["--task"]),
    ]
    for argv, needles in cases:
        assert_one_line_error(db(*argv), 2, *needles)
    assert dump(tmp_path / "ql.db") == before
    codes = {json.loads(db(*argv, "--json").err)["error"]["code"] for argv, _ in cases[:3]}
    assert codes == {"QL_REQUEST_ID_CONFLICT", "QL_NOT_RUNNABLE"}
    assert dump(tmp_path / "ql.db") == before


@pytest.mark.parametrize("path", [("task", "run"), ("trigger", "fire")], ids=" ".join)
def test_help(ql: Callable[..., Result], path: tuple[str, ...]) -> None:  # noqa: F811
    shown = ql(*path, "--help")
    assert shown.code == 0 and "--request-id" in shown.out and "--actor" in shown.out


# --- real processes ------------------------------------------------------------------------------


@pytest.mark.slow
def test_serve_runs_a_run_another_process_admitted_and_the_audit_stays_clean(
        tmp_path: Path) -> None:
    ql_ = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path, env={"QL_ACTOR": "alice"})
    ql_.run("db", "migrate")
    ql_.run("project", "create", "demo")
    ql_.run("task", "publish", "--project", "demo", "--task", "hello", "--shell",
            "echo run now $QL_RUN_ID")
    ql_.run("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
            "--cron", "* * * * * *", "--timezone", "UTC")
    server = ql_.start("serve", "--interval", "250ms")
    try:
        wait_for(lambda: ql_.json("run", "list", "--status", "succeeded", "--limit", "1"), 20,
                 "a scheduled run")
        admitted = ql_.json("task", "run", "--project", "demo", "--task", "hello")
        fired = ql_.json("trigger", "fire", "--project", "demo", "--trigger", "t1")
        for run in (admitted, fired):
            wait_for(lambda run=run: ql_.json("run", "show", run["id"])["run"]["status"]
                     == "succeeded", 10, f"run {run['id']} to succeed")
        ql_.run("trigger", "disable", "--project", "demo", "--trigger", "t1")
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    logs = ql_.run("run", "logs", admitted["id"]).stdout
    assert logs == f"run now {admitted['id']}\n"
    audit = ql_.json("audit", "--settle", "1s")
    assert audit["ok"], audit
    assert audit["totals"]["duplicates"] == 0 and audit["totals"]["spurious"] == 0
    every = ql_.json("run", "list", "--limit", "10000")
    assert sum(r["trigger_type"] == "manual" for r in every) == 2
    assert audit["execution"]["runs"] == len(every)  # the manual Runs are judged too (E1-E5)


@pytest.mark.slow
def test_a_cluster_worker_runs_a_run_now_woken_by_its_notification(
        pg_db: PgTestDatabase, tmp_path: Path) -> None:
    admin, runtime = pg_db.url("ql_admin"), pg_db.url("ql_runtime")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("QL_")}, "QL_ACTOR": "alice"}

    def ql_(*args: str, url: str = runtime) -> subprocess.CompletedProcess[str]:
        done = run_ql([*args, "--database-url", url],
                      timeout=60, env=env)
        assert done.returncode == 0, done.stderr
        return done

    ql_("project", "create", "demo", url=admin)
    ql_("task", "publish", "--project", "demo", "--task", "hello", "--shell",
        "echo cluster run now", url=admin)
    ql_("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
        "--cron", "0 0 1 1 *", "--timezone", "UTC", url=admin)
    refused = run_ql(["task", "run", "--project",
                      "demo", "--task", "hello", "--database-url", admin],
                     timeout=60)
    assert refused.returncode == 2 and "ql_admin" in refused.stderr, refused.stderr
    # polls once a minute: only the notification can start the Run within the wait below
    worker = Worker("w1", pg_db.url("ql_worker"), tmp_path, poll_ms=60_000).start()
    try:
        worker.wait_ready()
        # its listener has LISTENed on both channels (the second LISTEN is its last statement)
        wait_for(lambda: pg_db.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND "
            "state = 'idle' AND query = 'LISTEN qinglong_cancel'"), 30, "the worker's listener")
        admitted = json.loads(ql_("task", "run", "--project", "demo", "--task", "hello",
                                  "--request-id", "cluster-1", "--json").stdout)
        fired = json.loads(ql_("trigger", "fire", "--project", "demo", "--trigger", "t1",
                               "--json").stdout)

        def status(run_id: str) -> str:
            shown = json.loads(ql_("run", "show", run_id, "--json").stdout)
            return str(shown["run"]["status"])

        for run in (admitted, fired):
            wait_for(lambda run=run: status(run["id"]) == "succeeded", 15,
                     f"the worker to run {run['id']}")
    finally:
        assert worker.stop() == 0
    again = json.loads(ql_("task", "run", "--project", "demo", "--task", "hello",
                           "--request-id", "cluster-1", "--json").stdout)
    assert (again["admitted"], again["id"]) == (False, admitted["id"])
    shown = json.loads(ql_("run", "show", admitted["id"], "--json").stdout)
    assert (shown["run"]["origin"], shown["run"]["requested_by"]) == ("manual_user", "alice")
    [attempt] = shown["attempts"]
    assert attempt["worker"].startswith("w1:") and attempt["status"] == "succeeded"
    assert shown["log_tail"] == ["cluster run now"]
    audited = json.loads(ql_("audit", "--settle", "0s", "--json").stdout)
    assert audited["ok"], audited
    assert audited["execution"]["runs"] == 2
