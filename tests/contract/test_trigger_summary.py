"""Issue 23 item 2, on every database: the dashboard's summary of triggers
(GET /api/v1/triggers/summary, service/dashboard.py), read as the HTTP API reads.

- a trigger with no Run has no latest Run, an empty window and no rate or lag;
- a trigger's window counts as the stats do (a lost Run is a failure, a Run its overlap policy
  ended is skipped, Runs not ended are left out of the rate), over its latest N Runs by
  occurrence only; its lag is the admission lag of Runs its schedule admitted (none for a Run
  fired now);
- a paused or disabled trigger says so, with no next fire time while nothing will fire it;
- pages follow (project, trigger) order, a cursor starts exactly after the last trigger shown
  whatever is published meanwhile, and the project filter keeps one project;
- a page is a fixed number of statements, however many triggers it holds, and each trigger's
  Runs are read along runs_trigger_idx (no scan of the Runs).
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import InvalidInput, NotFound
from qinglong.service.container import Services
from qinglong.service.dashboard import encode_cursor
from qinglong.service.params import TriggerPauseParams
from qinglong.storage import kernel
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.storage.sqlfile import load_queries
from tests.contract.conftest import Backend

YEARLY = "0 0 1 1 *"


def publish(backend: Backend, *triggers: str, project: str = "demo",
            enabled: bool = True) -> None:
    d = backend.definitions
    d.task_publish(TaskPublishParams(project_id=project, task_id="job", name="job",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    for trigger in triggers:
        d.trigger_publish(TriggerPublishParams(project_id=project, trigger_id=trigger,
                                               task_id="job", expression=YEARLY,
                                               timezone="UTC", enabled=enabled))


def admit(backend: Backend, trigger: str, count: int) -> list[str]:
    """``count`` occurrences of ``trigger`` admitted by the scheduler, oldest first."""
    base = backend.now_ms() // 1000 * 1000
    found = []
    for n in range(count):
        found.append(backend.admit("demo", trigger, base - (count - n) * 1000))
        backend.let_time_pass()
    return found


def lag(backend: Backend, run_id: str) -> int:
    run = backend.runs.run_get(run_id).run
    assert run.scheduled_for_ms is not None
    return run.created_at_ms - run.scheduled_for_ms


def page(services: Services, **options: Any) -> dict[str, Any]:
    return services.summaries.page(**options).to_json()


def by_trigger(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["trigger"]: item for item in answer["items"]}


def test_a_trigger_with_no_run_has_no_last_run_rate_or_lag(
        backend: Backend, demo_services: Services) -> None:
    publish(backend, "quiet")
    answer = page(demo_services)
    [item] = answer["items"]
    assert (item["project"], item["trigger"], item["task"]) == ("demo", "quiet", "job")
    assert (item["state"], item["enabled"], item["pause"]) == ("firing", True, None)
    assert item["last_run"] is None
    assert item["window"] == {"runs": 0, "successes": 0, "failures": 0, "cancelled": 0,
                              "skipped": 0, "success_rate": None, "max_lag_ms": None}
    # the next fire time is the one GET /api/v1/triggers shows
    [listed] = demo_services.catalog.trigger_list("demo")
    assert item["next_fire_at_ms"] == listed.next_fire_at_ms[0]
    assert item["next_fire_at"] == listed.next_fire_at[0]
    assert (answer["window_runs"], answer["next_cursor"]) == (50, None)


def test_the_window_counts_outcomes_as_the_stats_do_and_the_lag_of_scheduled_runs(
        backend: Backend, demo_services: Services) -> None:
    publish(backend, "busy")
    good, failed, lost, cancelled, skipped, queued = admit(backend, "busy", 6)
    for run_id, status in ((good, "succeeded"), (failed, "failed"), (lost, "lost"),
                           (cancelled, "cancelled")):
        backend.force_run_status(run_id, status)
    backend.sql("UPDATE runs SET status = 'cancelled', cancel_reason = 'policy' WHERE id = ?",
                skipped)
    item = by_trigger(page(demo_services))["busy"]
    # the queued Run is in the window but not in the rate: 1 success of 4 ended
    assert item["window"] == {
        "runs": 6, "successes": 1, "failures": 2, "cancelled": 1, "skipped": 1,
        "success_rate": 0.25,
        "max_lag_ms": max(lag(backend, r) for r in (good, failed, lost, cancelled, skipped,
                                                    queued))}
    last = item["last_run"]
    run = backend.runs.run_get(queued).run
    assert (last["id"], last["status"], last["trigger_type"]) == (queued, "queued", "cron")
    assert (last["scheduled_for_ms"], last["created_at_ms"]) == (run.scheduled_for_ms,
                                                                 run.created_at_ms)
    assert last["admission_lag_ms"] == lag(backend, queued)
    # a window of 2: the latest two Runs by occurrence only (skipped, queued): no rate
    narrow = by_trigger(page(demo_services, window=2))["busy"]["window"]
    assert (narrow["runs"], narrow["skipped"], narrow["successes"], narrow["success_rate"]) == (
        2, 1, 0, None)
    assert narrow["max_lag_ms"] == max(lag(backend, skipped), lag(backend, queued))
    # a window of 4 leaves the success out: no success of 3 ended (failed, lost, cancelled)
    assert by_trigger(page(demo_services, window=4))["busy"]["window"]["success_rate"] == 0.0


def test_a_run_fired_now_is_the_last_run_with_no_admission_lag(
        backend: Backend, demo_services: Services) -> None:
    publish(backend, "fired")
    manual = demo_services.manual
    view = manual.admit(manual.request("demo", actor="admin", trigger_id="fired"))
    item = by_trigger(page(demo_services))["fired"]
    assert (item["last_run"]["id"], item["last_run"]["trigger_type"]) == (view.id, "manual")
    assert item["last_run"]["admission_lag_ms"] is None
    assert (item["window"]["runs"], item["window"]["max_lag_ms"]) == (1, None)


def test_paused_and_disabled_triggers_say_so(backend: Backend,
                                             demo_services: Services) -> None:
    publish(backend, "held", "running")
    backend.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="off", task_id="job", expression=YEARLY, timezone="UTC",
        enabled=False))
    demo_services.catalog.trigger_pause(TriggerPauseParams(
        project_id="demo", trigger_id="held", actor="admin", reason="maintenance"))
    items = by_trigger(page(demo_services))
    held = items["held"]
    assert (held["state"], held["enabled"]) == ("paused", True)
    assert held["pause"]["reason"] == "maintenance" and held["pause"]["until"] is None
    assert held["next_fire_at"] is None  # paused until resumed: nothing is due
    off = items["off"]
    assert (off["state"], off["enabled"], off["pause"], off["next_fire_at"]) == (
        "disabled", False, None, None)
    assert (items["running"]["state"], items["running"]["enabled"]) == ("firing", True)
    assert items["running"]["next_fire_at_ms"] is not None


def test_pages_follow_the_key_and_a_cursor_starts_after_the_last_trigger_shown(
        backend: Backend, demo_services: Services) -> None:
    publish(backend, "b", "c", "d", "e", "f")
    backend.definitions.project_create(ProjectCreateParams(project_id="other"))
    publish(backend, "a", project="other")
    first = page(demo_services, limit=2)
    assert [(i["project"], i["trigger"]) for i in first["items"]] == [("demo", "b"),
                                                                        ("demo", "c")]
    assert first["next_cursor"] == encode_cursor("demo", "c")
    # published meanwhile, before the cursor and after it: the next page starts after c
    publish(backend, "a", "cc")
    second = page(demo_services, limit=2, cursor=first["next_cursor"])
    assert [i["trigger"] for i in second["items"]] == ["cc", "d"]
    third = page(demo_services, limit=2, cursor=second["next_cursor"])
    assert [(i["project"], i["trigger"]) for i in third["items"]] == [("demo", "e"),
                                                                        ("demo", "f")]
    last = page(demo_services, limit=2, cursor=third["next_cursor"])
    assert [(i["project"], i["trigger"]) for i in last["items"]] == [("other", "a")]
    assert last["next_cursor"] is None
    # the project filter keeps one project, in pages too
    only = page(demo_services, project="demo", limit=10)
    assert [i["trigger"] for i in only["items"]] == ["a", "b", "c", "cc", "d", "e", "f"]
    assert only["next_cursor"] is None
    assert page(demo_services, project="demo", limit=6)["next_cursor"] == encode_cursor(
        "demo", "e")
    assert page(demo_services, project="other")["items"][0]["trigger"] == "a"
    # a caller who may read some projects only sees theirs, in pages too
    mine = page(demo_services, visible={"other"})
    assert [(i["project"], i["trigger"]) for i in mine["items"]] == [("other", "a")]
    seen = page(demo_services, visible={"demo", "ghost"}, limit=4)
    assert [i["trigger"] for i in seen["items"]] == ["a", "b", "c", "cc"]
    rest = page(demo_services, visible={"demo", "ghost"}, limit=4, cursor=seen["next_cursor"])
    assert [i["trigger"] for i in rest["items"]] == ["d", "e", "f"]
    assert rest["next_cursor"] is None
    assert page(demo_services, visible=set())["items"] == []


def walk(services: Services, **options: Any) -> list[list[str]]:
    """Every page from the first, as lists of "project/trigger"."""
    pages, cursor = [], None
    while True:
        got = page(services, cursor=cursor, **options)
        pages.append([f"{i['project']}/{i['trigger']}" for i in got["items"]])
        cursor = got["next_cursor"]
        if cursor is None:
            return pages


def test_pins_come_first_across_pages_then_the_rest_each_once(
        backend: Backend, demo_services: Services) -> None:
    publish(backend, "a", "b", "c", "d", "e", "f")
    backend.definitions.project_create(ProjectCreateParams(project_id="other"))
    publish(backend, "a", project="other")
    # two pins fill the first page exactly (a pin of nothing is left out); the rest follow
    pins = {("demo", "e"), ("other", "a"), ("demo", "gone")}
    assert walk(demo_services, limit=2, pins_first=pins) == [
        ["demo/e", "other/a"], ["demo/a", "demo/b"], ["demo/c", "demo/d"], ["demo/f"]]
    # more pins than a page holds: they go on over two pages, the second ends with the rest
    pins = {("demo", "a"), ("demo", "c"), ("demo", "f")}
    assert walk(demo_services, limit=2, pins_first=pins) == [
        ["demo/a", "demo/c"], ["demo/f", "demo/b"], ["demo/d", "demo/e"], ["other/a"]]
    # the filters hold in both parts; no pins, the plain order
    assert walk(demo_services, limit=3, pins_first=pins, project="demo") == [
        ["demo/a", "demo/c", "demo/f"], ["demo/b", "demo/d", "demo/e"]]
    assert walk(demo_services, limit=2, pins_first=pins, visible={"other"}) == [["other/a"]]
    assert walk(demo_services, limit=4, pins_first=set()) == walk(demo_services, limit=4)
    # a cursor into the pins is refused without pins_first; with no pins left, the rest
    into_pins = page(demo_services, limit=2, pins_first=pins)["next_cursor"]
    with pytest.raises(InvalidInput) as refused:
        demo_services.summaries.page(limit=2, cursor=into_pins)
    assert refused.value.field == "cursor"
    assert [i["trigger"] for i in page(demo_services, limit=2, cursor=into_pins,
                                       pins_first=set())["items"]] == ["a", "b"]


def test_an_unknown_project_or_a_cursor_the_api_did_not_give_is_refused(
        demo_services: Services) -> None:
    with pytest.raises(NotFound):
        demo_services.summaries.page("ghost")
    for cursor in ("not-a-cursor", "W10", encode_cursor("Bad Project", "t")):
        with pytest.raises(InvalidInput) as refused:
            demo_services.summaries.page(cursor=cursor)
        assert refused.value.field == "cursor"
    for name, value in (("limit", 0), ("limit", 201), ("window", 0), ("window", 201)):
        with pytest.raises(InvalidInput) as refused:
            demo_services.summaries.page(**{name: value})  # type: ignore[arg-type]
        assert refused.value.field == name


def test_a_page_is_the_same_few_statements_whatever_the_number_of_triggers(
        backend: Backend, demo_services: Services, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[str] = []
    execute = kernel.Tx.execute

    def counted(self: kernel.Tx, name: str, params: Any = None) -> Any:
        sent.append(name)
        return execute(self, name, params)

    publish(backend, "t00", "t01", "t39")
    for trigger in ("t00", "t01", "t39"):
        admit(backend, trigger, 2)
    publish(backend, *(f"t{n:02d}" for n in range(2, 39)))
    monkeypatch.setattr(kernel.Tx, "execute", counted)
    for project in (None, "demo"):
        statements = []
        for limit in (1, 3, 40):
            sent.clear()
            answer = page(demo_services, project=project, limit=limit)
            assert len(answer["items"]) == limit
            statements.append(list(sent))
        # the same statements for 1 trigger as for 40, the page's Runs read by one of them
        assert statements[0] == statements[1] == statements[2], (project, statements)
        assert statements[0].count("trigger_summary_page") == 1, statements
        assert len(statements[0]) <= 3, statements  # the project, the page (and its labels)


# --- the plan: each trigger's Runs along runs_trigger_idx, never a scan of the Runs ---------

RUNS_PER_TRIGGER = 5_000


def _seed_runs(backend: Backend, triggers: list[str]) -> None:
    """``RUNS_PER_TRIGGER`` ended Runs per trigger, written past the product (as the owner)."""
    for trigger in triggers:
        backend.sql(
            "INSERT INTO runs (id, project_id, task_id, task_revision, trigger_id, "
            "trigger_type, execution_origin, execution_owner, scheduled_for_ms, status, "
            "version, event_sequence, created_at_ms) "
            "SELECT CAST(? AS text) || '-' || n, 'demo', 'job', '1', CAST(? AS text), 'cron', 'scheduled', 'runtime', "
            "n * 1000, 'succeeded', 1, 1, n * 1000 + 5 FROM ("
            "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < ?) "
            "SELECT n FROM k) AS numbers", trigger, trigger, RUNS_PER_TRIGGER)


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += _nodes(child)
    return found


def test_each_triggers_runs_are_read_along_the_trigger_index(
        backend: Backend, demo_services: Services) -> None:
    triggers = [f"t{n}" for n in range(4)]
    publish(backend, *triggers)
    _seed_runs(backend, triggers)
    args = {"project_id": None, "projects": None, "label": None, "after_project": None,
            "after_trigger": None, "limit": 50, "window": 50, "only": None, "skip": None}
    if backend.capabilities.name == "postgresql":
        backend.sql("ANALYZE runs")
        statement = load_queries("qinglong.storage.postgres")["trigger_summary_page"]
        with psycopg.connect(backend.url("ql_web")) as conn:
            [(plan,)] = conn.execute("EXPLAIN (FORMAT JSON) " + statement, args).fetchall()
        nodes = _nodes((plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"])
        scans = [n for n in nodes if n.get("Relation Name") == "runs"]
        assert scans, nodes
        assert all(n["Node Type"] != "Seq Scan" for n in scans), scans
        assert {n.get("Index Name") for n in scans} == {"runs_trigger_idx"}, scans
    else:
        statement = load_queries("qinglong.storage.sqlite")["trigger_summary_page"]
        rows = backend.sql("EXPLAIN QUERY PLAN " + statement.replace(":project_id", "NULL").replace(":projects", "NULL")
                           .replace(":label", "NULL").replace(":only", "NULL")
                           .replace(":skip", "NULL")
                           .replace(":after_project", "NULL").replace(":after_trigger", "NULL")
                           .replace(":limit", "50").replace(":window", "50"))
        details = [str(row["detail"]) for row in rows]
        # x and l are the runs table (y: the rows x gave, scanned once read)
        on_runs: list[str] = [d for d in details if d.split(" ")[1:2] in (["x"], ["l"])]
        assert on_runs, details
        assert not [d for d in on_runs if d.startswith("SCAN")], details
        assert all("runs_trigger_idx" in d for d in on_runs if d.startswith("SEARCH x")), details
        assert [d for d in on_runs if d.startswith("SEARCH x")], details
    answer = page(demo_services)
    assert [i["window"]["runs"] for i in answer["items"]] == [50] * 4
    assert [i["last_run"]["id"] for i in answer["items"]] == [
        f"{t}-{RUNS_PER_TRIGGER}" for t in triggers]
