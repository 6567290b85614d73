"""Flows end to end on SQLite (issue 21, item 1): `ql flow publish -f` a fan-out/fan-in flow
with a failure handler, `ql flow run`, and `ql serve` executing it: every node runs once, in
the order its edges say, and `ql flow show` tells the outcome; a failing node releases its
handler and skips what needed its success; `ql flow cancel` cascades; bad input is one clear
error line, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.test_cli_errors import Result, assert_one_line_error, ql  # noqa: F401
from tests.support.ql import Ql, wait_for

FLOW = """\
flow: etl
name: Nightly ETL
nodes:
  extract: extract
  clean-a: {task: clean, after: extract, parameters: {part: a}}
  clean-b: {task: clean, after: extract, parameters: {part: b}}
  load:
    task: load
    after: [clean-a, clean-b]
  alert:
    task: alert
    after: {load: failure}
"""


def _tasks(q: Ql, log: Path, load: str) -> None:
    q.run("db", "migrate")
    q.run("project", "create", "demo")
    for task, shell in (("extract", f"echo extract >> {log}"),
                        ("clean", f"echo clean-$part >> {log}"),
                        ("load", f"echo load >> {log}; {load}"),
                        ("alert", f"echo alert >> {log}")):
        extra = ("--param", "part=x") if task == "clean" else ()
        q.run("task", "publish", "--project", "demo", "--task", task, "--shell", shell, *extra)


def _finished(q: Ql, flow_run: str) -> dict[str, object] | None:
    shown: dict[str, object] = q.json("flow", "show", flow_run)
    return shown if shown["status"] != "running" else None


@pytest.mark.parametrize(("load", "outcome"), [("true", "succeeded"), ("exit 3", "failed")])
def test_serve_runs_a_flow_each_node_once_in_edge_order(tmp_path: Path, load: str,
                                                        outcome: str) -> None:
    q = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path)
    log = tmp_path / "order.log"
    _tasks(q, log, load)
    (tmp_path / "flow.yaml").write_text(FLOW)
    published = q.json("flow", "publish", "-f", "flow.yaml", "--project", "demo")
    assert (published["revision"], published["created"]) == (1, True)
    started = q.json("flow", "run", "--project", "demo", "--flow", "etl",
                     "--request-id", "nightly-1")
    assert started["started"] is True
    assert {s["node"]: s["state"] for s in started["steps"]} == {
        "extract": "released", "clean-a": "pending", "clean-b": "pending", "load": "pending",
        "alert": "pending"}
    server = q.start("serve", "--interval", "250ms")
    try:
        shown = wait_for(lambda: _finished(q, started["id"]), 60, "the flow run to end")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert shown["status"] == outcome
    lines = log.read_text().split()
    assert lines[0] == "extract" and sorted(lines[1:3]) == ["clean-a", "clean-b"]
    assert lines[3] == "load"
    states = {s["node"]: s["state"] for s in shown["steps"]}
    if outcome == "succeeded":
        assert lines[4:] == [] and states["alert"] == "skipped"
    else:
        assert lines[4:] == ["alert"] and states["alert"] == "succeeded"
        assert states["load"] == "failed"
    # sent again, the request id starts nothing new
    again = q.json("flow", "run", "--project", "demo", "--flow", "etl",
                   "--request-id", "nightly-1")
    assert (again["id"], again["started"]) == (started["id"], False)
    listed = q.json("flow", "runs", "--project", "demo")
    assert [r["id"] for r in listed] == [started["id"]]
    text = q.run("flow", "show", started["id"][:13]).stdout
    assert f"flow run {started['id']} of demo/etl@1: {outcome}" in text
    audited = q.json("audit")
    assert audited["flows"]["violations"] == 0, audited["flows"]
    assert audited["flows"]["steps_released"] == (4 if outcome == "succeeded" else 5)


def test_cancel_cascades_to_queued_runs_and_pending_nodes(tmp_path: Path) -> None:
    q = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path)
    _tasks(q, tmp_path / "order.log", "true")
    (tmp_path / "flow.yaml").write_text(FLOW)
    q.run("flow", "publish", "-f", "flow.yaml", "--project", "demo")
    started = q.json("flow", "run", "--project", "demo", "--flow", "etl")
    cancelled = q.json("flow", "cancel", started["id"])
    assert (cancelled["status"], cancelled["ended_reason"]) == ("cancelled", "cancelled")
    steps = {s["node"]: s for s in cancelled["steps"]}
    assert steps["extract"]["run_status"] == "cancelled"
    assert {steps[n]["state"] for n in ("clean-a", "clean-b", "load", "alert")} == {"skipped"}
    again = q.run("flow", "cancel", started["id"], check=False)
    assert again.returncode != 0 and "already ended" in again.stderr
    assert "Traceback" not in again.stderr


@pytest.fixture
def db(ql: Callable[..., Result], tmp_path: Path,  # noqa: F811
       monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'ql.db'}"

    def run(*argv: str) -> Result:
        return ql(*argv, "--database-url", url)

    for step in (("db", "migrate"), ("project", "create", "demo"),
                 ("task", "publish", "--project", "demo", "--task", "hello", "--shell", "true")):
        assert run(*step).code == 0
    return run


@pytest.mark.parametrize(("text", "code", "needles"), [
    ("flow: f\nnodes: {a: hello, b: {task: hello, after: c}}\n", 2,
     ("nodes.b.after", "'c'")),
    ("flow: f\nnodes: {a: {task: hello, after: b}, b: {task: hello, after: a}}\n", 2,
     ("cycle",)),
    ("flow: f\nnodes: {a: nope}\n", 2, ("nodes.a.task", "demo/nope does not exist")),
    ("flow: f\nnodes: [a\n", 2, ("flow.yaml at line",)),
    ("- just a list\n", 2, ("a flow document is a mapping",)),
])
def test_a_bad_flow_file_is_one_clear_error(db: Callable[..., Result], tmp_path: Path,
                                            text: str, code: int,
                                            needles: tuple[str, ...]) -> None:
    (tmp_path / "flow.yaml").write_text(text)
    assert_one_line_error(db("flow", "publish", "-f", "flow.yaml", "--project", "demo"), code,
                          *needles)


def test_unknown_flows_and_flow_runs_are_clear_errors(db: Callable[..., Result]) -> None:
    assert_one_line_error(db("flow", "show", "0000"), 2, "flow run")
    assert_one_line_error(db("flow", "run", "--project", "demo", "--flow", "nope"), 2, "nope")
    assert_one_line_error(db("flow", "run", "--project", "demo", "--flow", "x",
                             "--param", "oops"), 2, "--param")
    listed = db("flow", "list", "--project", "demo", "--json")
    assert json.loads(listed.out) == []


DEFS = """\
apiVersion: qinglong/v1
project: demo
tasks:
  extract: {shell: echo extract}
  clean:
    shell: echo clean $part
    parameters: [{name: part, default: x}]
  load: {shell: echo load}
flows:
  etl:
    name: Nightly ETL
    timeout: 1h
    nodes:
      extract: extract
      clean-a: {task: clean, after: extract, parameters: {part: a}}
      load: {task: load, after: {clean-a: always}}
"""


def test_apply_and_export_carry_flows(db: Callable[..., Result], tmp_path: Path) -> None:
    (tmp_path / "defs.yaml").write_text(DEFS)
    dry = db("apply", "-f", "defs.yaml", "--dry-run")
    assert dry.code == 0 and "flow demo/etl: would create" in dry.out, dry.out + dry.err
    assert "nothing was written" in dry.out
    assert json.loads(db("flow", "list", "--project", "demo", "--json").out) == []
    first = db("apply", "-f", "defs.yaml")
    assert first.code == 0 and "flow demo/etl: created (revision 1)" in first.out, first.err
    again = db("apply", "-f", "defs.yaml")
    assert "flow demo/etl: unchanged (revision 1)" in again.out and "nothing to change" in again.out
    # a task the flow runs changes: the flow is published again, pinning its new revision
    (tmp_path / "defs.yaml").write_text(DEFS.replace("echo load}", "echo load v2}"))
    changed = db("apply", "-f", "defs.yaml")
    assert "flow demo/etl: changed (revision 2)" in changed.out, changed.out
    assert "pins:" in changed.out
    shown = json.loads(db("flow", "describe", "--project", "demo", "--flow", "etl", "--json").out)
    assert {n["id"]: n["task_revision"] for n in shown["nodes"]}["load"] == 2
    assert shown["timeout_ms"] == 3_600_000 and shown["name"] == "Nightly ETL"
    # the export, applied again, changes nothing
    exported = db("export", "--project", "demo")
    assert exported.code == 0 and "flows:" in exported.out, exported.err
    (tmp_path / "exported.yaml").write_text(exported.out)
    round_trip = db("apply", "-f", "exported.yaml")
    assert "nothing to change" in round_trip.out, round_trip.out


@pytest.mark.parametrize(("edit", "needles"), [
    (("clean-a: {task: clean,", "clean-a: {task: nope,"),
     ("defs.yaml:", "flows.etl.nodes.clean-a.task", "'nope' is not defined")),
    (("{part: a}", "{part: [1]}"), ("flows.etl.nodes.clean-a.parameters",)),
    (("extract: extract\n", "extract: {task: extract, after: load}\n"), ("cycle",)),
    (("    name: Nightly ETL\n", "    flow: other\n"), ("flows.etl.flow",)),
])
def test_a_bad_flow_in_a_file_is_reported_with_its_line_and_nothing_written(
        db: Callable[..., Result], tmp_path: Path, edit: tuple[str, str],
        needles: tuple[str, ...]) -> None:
    (tmp_path / "defs.yaml").write_text(DEFS.replace(*edit))
    done = db("apply", "-f", "defs.yaml")
    assert done.code != 0 and "Traceback" not in done.err
    for needle in needles:
        assert needle in done.err, done.err
    assert json.loads(db("flow", "list", "--project", "demo", "--json").out) == []
    assert "extract" not in db("task", "list", "--project", "demo").out


@pytest.mark.parametrize("edit", [
    ("{part: a}", "{part: b}"),  # a node's parameters
    ("clean-a: {task: clean, after: extract, parameters: {part: a}}",
     "clean-a: {task: load, after: extract}"),  # a node's task
    ("load: {task: load, after: {clean-a: always}}",
     "load: {task: load, after: {clean-a: always, extract: success}, join: any}"),  # its join
])
def test_apply_sees_every_change_to_a_node(db: Callable[..., Result], tmp_path: Path,
                                           edit: tuple[str, str]) -> None:
    (tmp_path / "defs.yaml").write_text(DEFS)
    assert db("apply", "-f", "defs.yaml").code == 0
    (tmp_path / "defs.yaml").write_text(DEFS.replace(*edit))
    changed = db("apply", "-f", "defs.yaml")
    assert changed.code == 0 and "flow demo/etl: changed (revision 2)" in changed.out, (
        changed.out + changed.err)
    assert "nodes:" in changed.out
    assert "nothing to change" in db("apply", "-f", "defs.yaml").out
