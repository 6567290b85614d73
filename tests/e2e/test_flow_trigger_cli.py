"""Triggers that give parameter values and triggers that start a flow, end to end on SQLite.

A real `ql serve` process runs the schedule and the commands; the other `ql` commands run
in-process through `qinglong.cli.main.main` against the same database file (one Python
start-up each would make the file slow):

- `ql trigger publish --flow pair --every 1s --param who=zed`: every occurrence starts one
  flow run (BY `trigger tick`), whose nodes each run exactly once, in edge order, with the
  trigger's value; `ql audit` stays OK.
- a task trigger's `--param who=eve` reaches every scheduled Run's command.
- a flow whose pinned task moved on records each occurrence as a failed flow run (every node
  skipped, `publish the flow again`); the schedule goes on, and starts the flow again once
  it is published again.
- bad values, an unknown flow, `ql trigger fire` on a flow trigger and a task republish that
  would break a trigger's values are each one clear error line, writing nothing.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_cli_errors import Result, assert_one_line_error, ql  # noqa: F401
from tests.support.cli_session import PROJECT, Cli, as_json, ok, serving, session
from tests.support.ql import wait_for

# extract -> (load-a, load-b); load-a gives its own value, which the trigger's value overrides
FLOW = """\
flow: pair
nodes:
  extract: extract
  load-a: {task: load, after: extract, parameters: {who: node}}
  load-b: {task: load, after: extract}
"""


def _line(log: Path) -> str:
    """A shell command appending `TASK WHO RUN TRIGGER` (`-`: no trigger) to the log."""
    return f'echo "$QL_TASK_ID $who $QL_RUN_ID ${{QL_TRIGGER_ID:--}}" >> {log}'


@pytest.fixture
def cli(ql: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:  # noqa: F811
    return session(ql, tmp_path, monkeypatch)


def _flow_tasks(cli: Cli, log: Path) -> None:
    for task in ("extract", "load"):
        ok(cli, "task", "publish", *PROJECT, "--task", task, "--param", "who=world",
            "--shell", _line(log))
    Path("flow.yaml").write_text(FLOW)
    ok(cli, "flow", "publish", "-f", "flow.yaml", *PROJECT)


def _log(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def _ended_flow_runs(cli: Cli, at_least: int, *, revision: int | None = None,
                     ) -> list[dict[str, Any]] | None:
    """The project's ended flow runs (of `revision`, if given), once there are `at_least`."""
    runs: list[dict[str, Any]] = as_json(cli, "flow", "runs", *PROJECT)
    ended = [r for r in runs if r["status"] != "running"
             and (revision is None or r["revision"] == revision)]
    return ended if len(ended) >= at_least else None


def _audit_ok(cli: Cli) -> None:
    done = cli("audit", *PROJECT)
    assert done.code == 0, done.out + done.err
    assert "OK:" in done.out, done.out
    audited = as_json(cli, "audit", *PROJECT)
    assert audited["ok"] is True and audited["flows"]["violations"] == 0, audited["flows"]


@pytest.mark.slow
def test_serve_starts_the_flow_at_each_occurrence_with_the_triggers_value(
        cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "steps.log"
    _flow_tasks(cli, log)
    published = ok(cli, "trigger", "publish", *PROJECT, "--trigger", "tick", "--flow", "pair",
                    "--every", "1s", "--param", "who=zed")
    assert "starts flow pair" in published and "values who=zed" in published, published
    listed = ok(cli, "trigger", "list", *PROJECT).splitlines()
    assert "flow pair" in next(row for row in listed if row.startswith("demo/tick")), listed
    (view,) = as_json(cli, "trigger", "list", *PROJECT)
    assert (view["flow"], view["task"], view["parameters"]) == ("pair", "extract", {"who": "zed"})

    with serving(tmp_path):
        wait_for(lambda: _ended_flow_runs(cli, 2), 60, "two flow runs started by the trigger",
                 interval=0.2)

    shown = [as_json(cli, "flow", "show", r["id"]) for r in as_json(cli, "flow", "runs", *PROJECT)]
    ended = [s for s in shown if s["status"] != "running"]
    assert len(ended) >= 2
    # one flow run per occurrence, each the trigger's, none on request
    assert all((s["trigger"], s["request_id"], s["parameters"]) == ("tick", None, {"who": "zed"})
               for s in shown), shown
    occurrences = [s["scheduled_for"] for s in shown]
    assert len(set(occurrences)) == len(occurrences), occurrences
    assert all(o and o.endswith(".000Z") for o in occurrences), occurrences

    lines = _log(log)
    seen = Counter(line[2] for line in lines)
    assert set(seen.values()) == {1}, f"a Run ran twice: {lines}"
    # every command ran with the trigger's value, over the node's own (load-a's `node`)
    assert {line[1] for line in lines} == {"zed"}, lines
    step_runs = {step["run"] for s in shown for step in s["steps"] if step["run"]}
    assert set(seen) <= step_runs, "a command ran that no flow run's step released"
    order = {line[2]: n for n, line in enumerate(lines)}
    for flow_run in ended:
        assert flow_run["status"] == "succeeded", flow_run
        steps = {step["node"]: step for step in flow_run["steps"]}
        assert set(steps) == {"extract", "load-a", "load-b"}
        assert {step["state"] for step in steps.values()} == {"succeeded"}, steps
        runs = {node: step["run"] for node, step in steps.items()}
        assert len(set(runs.values())) == 3, runs
        for node, run in runs.items():
            assert seen[run] == 1, (node, run, lines)  # ran, once
            assert lines[order[run]][:2] == [steps[node]["task"], "zed"], lines[order[run]]
        assert order[runs["extract"]] < min(order[runs["load-a"]], order[runs["load-b"]])

    table = ok(cli, "flow", "runs", *PROJECT).splitlines()
    assert len(table) == len(shown) + 1, table
    assert all(row.endswith("trigger tick") for row in table[1:]), table
    _audit_ok(cli)


@pytest.mark.slow
def test_a_task_triggers_values_reach_every_scheduled_run(cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "greet.log"
    ok(cli, "task", "publish", *PROJECT, "--task", "greet", "--param", "who=world",
        "--shell", f'{_line(log)}; echo "hello $who"')
    published = ok(cli, "trigger", "publish", *PROJECT, "--trigger", "tock", "--task", "greet",
                    "--every", "1s", "--param", "who=eve")
    assert "values who=eve" in published, published

    with serving(tmp_path):
        wait_for(lambda: len(_log(log)) >= 2, 60, "two scheduled Runs of the trigger",
                 interval=0.2)

    lines = _log(log)
    assert len(lines) >= 2
    assert all(line[:2] == ["greet", "eve"] and line[3] == "tock" for line in lines), lines
    assert len({line[2] for line in lines}) == len(lines), f"a Run ran twice: {lines}"
    for line in lines[:2]:
        shown = as_json(cli, "run", "show", line[2])
        assert (shown["run"]["trigger"], shown["run"]["parameters"]) == ("tock", {"who": "eve"})
        assert "hello eve" in ok(cli, "run", "logs", line[2])
    _audit_ok(cli)
    # --no-params: the task's defaults apply again
    ok(cli, "trigger", "publish", *PROJECT, "--trigger", "tock", "--no-params")
    (view,) = as_json(cli, "trigger", "list", *PROJECT)
    assert view["parameters"] == {}, view


@pytest.mark.slow
def test_a_stale_flow_fails_each_occurrence_and_the_schedule_goes_on(
        cli: Cli, tmp_path: Path) -> None:
    log = tmp_path / "steps.log"
    _flow_tasks(cli, log)
    ok(cli, "trigger", "publish", *PROJECT, "--trigger", "tick", "--flow", "pair",
        "--every", "1s", "--param", "who=zed")
    # the flow pins load@1; load moves on, so the flow cannot start until published again
    ok(cli, "task", "publish", *PROJECT, "--task", "load", "--param", "who=world",
        "--shell", f"{_line(log)}  # v2")

    with serving(tmp_path):
        failed = wait_for(lambda: _ended_flow_runs(cli, 2), 60, "two ended flow runs",
                          interval=0.2)
        again = as_json(cli, "flow", "publish", "-f", "flow.yaml", *PROJECT)
        assert again["revision"] == 2, again
        wait_for(lambda: _ended_flow_runs(cli, 1, revision=2), 60,
                 "a flow run of the flow published again", interval=0.2)

    for flow_run in failed:
        shown = as_json(cli, "flow", "show", flow_run["id"])
        assert (shown["status"], shown["trigger"], shown["revision"]) == ("failed", "tick", 1)
        assert {s["node"] for s in shown["steps"]} == {"extract", "load-a", "load-b"}
        for step in shown["steps"]:
            assert (step["state"], step["run"]) == ("skipped", None), step
            assert "publish the flow again" in step["error"], step
    by_revision: dict[int, list[str]] = {1: [], 2: []}
    for flow_run in as_json(cli, "flow", "runs", *PROJECT):
        assert flow_run["trigger"] == "tick"
        by_revision[flow_run["revision"]].append(flow_run["status"])
    assert set(by_revision[1]) == {"failed"}, by_revision
    assert "succeeded" in by_revision[2] and set(by_revision[2]) <= {"succeeded", "running"}
    # only the flow runs of revision 2 ran commands: extract and load, with the value
    lines = _log(log)
    assert lines and {line[1] for line in lines} == {"zed"}, lines
    _audit_ok(cli)


@pytest.fixture
def db(cli: Cli, tmp_path: Path) -> Cli:
    """Tasks extract, load (who) and count (n: integer), and the flow pair."""
    _flow_tasks(cli, tmp_path / "unused.log")
    ok(cli, "task", "publish", *PROJECT, "--task", "count", "--param", "n:int=2",
        "--shell", "true")
    return cli


def _triggers(db: Cli) -> dict[str, dict[str, Any]]:
    return {t["trigger"]: t for t in as_json(db, "trigger", "list", *PROJECT)}


@pytest.mark.parametrize(("args", "needles"), [
    (("--task", "count", "--param", "n=many"), ("ql: parameters", "'many'", "integer")),
    (("--task", "count", "--param", "nope=1"), ("ql: parameters", "'nope'")),
    (("--flow", "pair", "--param", "nope=1"), ("ql: parameters", "nope", "pair")),
    (("--flow", "pair", "--param", "who"), ("--param",)),
    (("--flow", "nope"), ("flow", "demo/nope", "not found")),
    (("--flow", "pair", "--task", "count"), ("--task", "count", "not a task of flow pair")),
])
def test_a_bad_trigger_is_one_clear_error_and_writes_nothing(
        db: Cli, args: tuple[str, ...], needles: tuple[str, ...]) -> None:
    done = db("trigger", "publish", *PROJECT, "--trigger", "bad", "--every", "1s", *args)
    assert_one_line_error(done, 2, *needles)
    assert _triggers(db) == {}


def test_fire_on_a_flow_trigger_names_flow_run(db: Cli) -> None:
    ok(db, "trigger", "publish", *PROJECT, "--trigger", "tick", "--flow", "pair",
        "--every", "1h")
    assert_one_line_error(db("trigger", "fire", *PROJECT, "--trigger", "tick"), 2,
                          "ql flow run --flow pair")
    assert as_json(db, "flow", "runs", *PROJECT) == []
    assert as_json(db, "run", "list") == []


def test_a_task_republish_that_breaks_a_triggers_values_is_refused(db: Cli) -> None:
    ok(db, "trigger", "publish", *PROJECT, "--trigger", "ct", "--task", "count",
        "--every", "1h", "--param", "n=5")
    refused = db("task", "publish", *PROJECT, "--task", "count", "--no-params",
                 "--shell", "true")
    assert_one_line_error(refused, 2, "trigger ct: parameters", "'n'", "--no-repin")
    # another type breaks the value too
    refused = db("task", "publish", *PROJECT, "--task", "count", "--param", "n:bool=false",
                 "--shell", "true")
    assert_one_line_error(refused, 2, "trigger ct: parameters", "--no-repin")
    assert [t["revision"] for t in as_json(db, "task", "list", *PROJECT)
            if t["task"] == "count"] == [1]
    forced = ok(db, "task", "publish", *PROJECT, "--task", "count", "--no-params",
                 "--shell", "true", "--no-repin")
    assert "revision 2" in forced, forced
    ct = _triggers(db)["ct"]
    assert (ct["state"], ct["task_revision"], ct["parameters"]) == ("stale-pin", 1, {"n": 5})


def test_a_flow_publish_that_breaks_a_flow_triggers_values_is_refused(db: Cli) -> None:
    """A task republish leaves the flow pinned to the revisions it runs (its occurrences fail
    with `publish the flow again` until it is); publishing the flow with the new revision is
    what would make the trigger's values wrong, so that publish is refused, naming it."""
    ok(db, "trigger", "publish", *PROJECT, "--trigger", "tick", "--flow", "pair",
        "--every", "1h", "--param", "who=zed")
    ok(db, "task", "publish", *PROJECT, "--task", "extract", "--param", "who:int=1",
        "--shell", "true")  # who becomes an integer, and the trigger gives zed
    refused = db("flow", "publish", "-f", "flow.yaml", *PROJECT)
    assert_one_line_error(refused, 2, "trigger tick: parameters (node extract)", "--no-params")
    ok(db, "trigger", "publish", *PROJECT, "--trigger", "tick", "--no-params")
    ok(db, "flow", "publish", "-f", "flow.yaml", *PROJECT)


APPLIED = """\
apiVersion: qinglong/v1
project: demo
tasks:
  a: {shell: "echo a", parameters: [{name: who, default: w}]}
  b: {shell: "echo b"}
triggers:
  nightly: {task: a, flow: ab, every: 1h, parameters: {who: zed}}
flows:
  ab:
    nodes:
      a: a
      b: {task: b, after: a}
"""


def test_apply_creates_a_flow_and_the_trigger_that_starts_it_in_one_file(cli: Cli) -> None:
    Path("all.yaml").write_text(APPLIED)
    ok(cli, "apply", "-f", "all.yaml")  # the flow is published before the trigger needs it
    [shown] = [t for t in as_json(cli, "trigger", "list") if t["trigger"] == "nightly"]
    assert (shown["flow"], shown["task"], shown["parameters"]) == ("ab", "a", {"who": "zed"})
    assert "nothing to change" in ok(cli, "apply", "-f", "all.yaml")
    exported = ok(cli, "export", "--project", "demo")
    assert "flow: ab" in exported and "who: zed" in exported
    Path("all.yaml").write_text(APPLIED.replace("flow: ab, ", ""))
    refused = cli("apply", "-f", "all.yaml")
    assert refused.code == 2 and "starts flow 'ab' for life" in refused.err, refused.err
