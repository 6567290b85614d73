"""The Audit log and Cluster pages (issue 23, item 1), in a real browser against `ql serve
--http`: an admin filters the audit log by user, action (and the actions under it), project
and time range, pages through it older and newer, and sees the API's refusal of a bad range
beside the filter; the cluster page shows each process's health -- alive, stale, dead (never
said it stopped) or stopped -- and follows a change on its next refresh. A viewer reads the
cluster with no control, and is refused the audit log."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium import webdriver

from qinglong.domain.task import MAX_CONCURRENCY
from tests.browser.panel_support import Panel, Site
from tests.browser.test_panel_findings import OVERFLOWING
from tests.support.test_api_support import login

pytestmark = pytest.mark.slow

PROJECTS = [f"aud-{i:02d}" for i in range(30)]


def _entries(site: Site, query: str = "") -> list[dict[str, object]]:
    items = site.http.ok("GET", f"/api/v1/audit?limit=1000{query}", site.admin)["items"]
    assert isinstance(items, list)
    return items


@pytest.fixture(scope="module")
def seeded(site: Site) -> None:
    for project in PROJECTS:
        site.http.ok("POST", "/api/v1/projects", site.admin, {"id": project}, (201, 409))
    session = login(site.http, "operator")
    site.http.ok("POST", "/api/v1/tokens", session, {"name": "cron box", "scope": "read"}, 201)


def _column(panel: Panel, index: int) -> list[str]:
    return [r[index] for r in panel.rows("audit") if len(r) > index]


def _wait_rows(panel: Panel, check: Callable[[list[list[str]]], bool],
               what: str) -> list[list[str]]:
    """The audit table's rows once they are drawn and pass ``check``."""
    def drawn(d: webdriver.Chrome) -> list[list[str]] | bool:
        rows = [r for r in panel.rows("audit") if len(r) > 1]  # not the empty-table row
        return rows if rows and check(rows) else False

    found = panel.until(drawn, what)
    assert isinstance(found, list)
    return found


def test_an_admin_filters_the_audit_log_and_pages_through_it(panel: Panel, site: Site,
                                                             seeded: None) -> None:
    panel.login("admin")
    panel.open("/audit", "audit")
    _wait_rows(panel, lambda rows: len(rows) > 1, "the newest entries")
    # by user
    panel.fill("audit-actor", "operator")
    panel.by_id("audit-apply").click()
    rows = _wait_rows(panel, lambda rows: {r[1] for r in rows} == {"operator"}, "operator's")
    assert "token.create" in [r[3] for r in rows], rows
    # by action and the actions under it, 25 a page: older, then newer again
    panel.fill("audit-actor", "")
    panel.fill("audit-action", "project")
    panel.by_id("audit-limit").send_keys("25")
    panel.by_id("audit-apply").click()
    first = _wait_rows(panel, lambda rows: len(rows) == 25 and
                       {r[3] for r in rows} == {"project.create"}, "a page of project entries")
    assert "action=project" in panel.d.current_url and panel.text("audit-page") == "Page 1"
    panel.click("#audit-older:not([disabled])", "Older")
    older = _wait_rows(panel, lambda rows: panel.text("audit-page") == "Page 2"
                       and rows != first, "page 2 drawn")
    assert {r[3] for r in older} == {"project.create"} and len(older) >= 5
    assert not {r[5] for r in older} & {r[5] for r in first}, (older, first)  # no entry twice
    panel.click("#audit-newer:not([disabled])", "Newer")
    _wait_rows(panel, lambda rows: panel.text("audit-page") == "Page 1" and rows == first,
               "page 1 drawn again, as it was")
    # by project
    panel.fill("audit-action", "")
    panel.fill("audit-project", "aud-07")
    panel.by_id("audit-apply").click()
    rows = _wait_rows(panel, lambda rows: {r[4] for r in rows} == {"aud-07"}, "aud-07's")
    assert [(r[3], r[5]) for r in rows] == [("project.create", "project aud-07")]
    panel.shot("audit-filtered")


def test_the_audit_log_keeps_a_time_range_and_shows_a_refused_one(panel: Panel, site: Site,
                                                                  seeded: None) -> None:
    made = [e for e in _entries(site, "&action=project.create")
            if str(e["target"]).startswith("project aud-")]
    since = min(int(str(e["at_ms"])) for e in made)
    until = since + 1  # [since, until): the entries of that millisecond, newest first
    expected = [e["target"] for e in made if int(str(e["at_ms"])) == since]
    panel.login("admin")
    panel.open(f"/audit?action=project.create&since={since}&until={until}", "audit")
    rows = _wait_rows(panel, lambda rows: len(rows) == len(expected), "the range")
    assert [r[5] for r in rows] == expected
    assert panel.by_id("audit-since").get_attribute("value")  # the range is in the form
    # a range that ends before it starts: the API's problem beside the filter, no rows lost
    panel.open(f"/audit?since={until}&until={since}", "audit")
    said = panel.until(lambda d: panel.text("audit-problem"), "the refusal")
    assert "until" in said and "later than since" in said, said


def test_an_operator_is_refused_the_audit_log(panel: Panel, site: Site) -> None:
    panel.login("operator")
    panel.open("/audit", "audit")
    said = panel.until(lambda d: panel.text("problem"), "the refusal")
    assert "role" in said.lower() or "forbidden" in said.lower(), said
    assert panel.rows("audit") == [] and panel.shown('nav a[href="/audit"]') == 0


# --- the cluster --------------------------------------------------------------------------------

INSTANCES = ("w-alive", "w-stale", "c-dead", "w-stopped")


@pytest.fixture
def instances(site: Site) -> Iterator[sqlite3.Connection]:
    """Four registered processes in the site's database (as other hosts would register)."""
    db = sqlite3.connect(Path(site.server.log).parent / "ql.db", timeout=30,
                         isolation_level=None)
    now = int(time.time() * 1000)
    for name, role in zip(INSTANCES, ("worker", "worker", "control", "worker"), strict=True):
        db.execute("INSERT OR REPLACE INTO instances (instance_id, role, host, pid, started_at_ms,"
                   " seen_at_ms, stopped_at_ms, labels) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                   (name, role, f"host-{name}", 4000 + len(name), now - 600_000, now,
                    now if name == "w-stopped" else None,
                    json.dumps({"region": "eu"}) if name == "w-alive" else None))
    yield db
    db.execute("DELETE FROM instances WHERE instance_id IN (?, ?, ?, ?)", INSTANCES)
    db.close()


def _beat(db: sqlite3.Connection, ages: dict[str, int]) -> None:
    """Each process last seen ``ages[name]`` ms ago, by this host's clock (the database's)."""
    now = int(time.time() * 1000)
    for name, age in ages.items():
        db.execute("UPDATE instances SET seen_at_ms = ? WHERE instance_id = ?", (now - age, name))


def _states(panel: Panel) -> dict[str, str]:
    found = panel.d.execute_script(
        "var out = {}; document.querySelectorAll('#cluster tr[data-instance]').forEach("
        "function (r) { out[r.getAttribute('data-instance')] = r.getAttribute('data-state'); });"
        "return out;")
    assert isinstance(found, dict)
    return {str(k): str(v) for k, v in found.items()}


def test_the_cluster_shows_each_processs_health_and_follows_it(panel: Panel, site: Site,
                                                              instances: sqlite3.Connection
                                                              ) -> None:
    ages = {"w-alive": 0, "w-stale": 15_000, "c-dead": 120_000}
    wanted = {"w-alive": "alive", "w-stale": "stale", "c-dead": "dead", "w-stopped": "stopped"}
    panel.login("operator")
    panel.open("/cluster", "cluster")

    def shown(d: webdriver.Chrome) -> bool:
        _beat(instances, ages)  # kept at these ages until a refresh shows them
        states = _states(panel)
        return all(states.get(k) == v for k, v in wanted.items())

    panel.until(shown, "the four states")
    summary = panel.text("cluster-summary")
    assert "1 stale" in summary and "1 dead" in summary and "1 stopped" in summary, summary
    row = next(r for r in panel.rows("cluster") if r[1] == "w-alive")
    assert row[0] == "worker" and row[2] == "host-w-alive" and row[4] == "region=eu", row
    order = [r[1] for r in panel.rows("cluster") if r[1] in wanted]
    assert order == ["w-alive", "w-stale", "c-dead", "w-stopped"], order
    panel.shot("cluster")
    # a process that stops: the next refresh says so
    instances.execute("UPDATE instances SET stopped_at_ms = seen_at_ms WHERE instance_id = ?",
                      ("w-alive",))
    panel.until(lambda d: _states(panel).get("w-alive") == "stopped", "w-alive stopped")


def test_a_viewer_reads_the_cluster_with_no_control(panel: Panel, site: Site,
                                                    instances: sqlite3.Connection) -> None:
    panel.login("viewer")
    panel.open("/cluster", "cluster")
    panel.until(lambda d: "w-stopped" in _states(panel), "the processes")
    assert panel.shown("#main button, #main input, #main select, #main textarea") == 0
    assert "queued" in panel.text("cluster-queue-summary")


def test_an_admin_sets_and_removes_the_global_limit(panel: Panel, site: Site) -> None:
    panel.login("admin")
    panel.open("/cluster", "cluster")
    panel.until(lambda d: panel.text("limit-global") == "any number of", "no limit yet")
    panel.fill("limit-value", str(MAX_CONCURRENCY + 1))  # past the maximum: the API refuses
    panel.by_id("limit-set").click()
    panel.until(lambda d: "global" in panel.text("limit-result"), "the API's refusal")
    assert site.http.ok("GET", "/api/v1/limits", site.admin) == {"global": None}
    panel.fill("limit-value", "7")
    panel.by_id("limit-set").click()
    panel.until(lambda d: panel.text("limit-global") == "7", "the limit shown")
    assert site.http.ok("GET", "/api/v1/limits", site.admin) == {"global": 7}
    panel.by_id("limit-clear").click()
    panel.click("#limit-form .confirm-yes", "Yes")
    panel.until(lambda d: panel.text("limit-global") == "any number of", "the limit removed")
    assert site.http.ok("GET", "/api/v1/limits", site.admin) == {"global": None}


# --- a phone --------------------------------------------------------------------------------------


def test_no_administration_page_is_wider_than_a_phone(panel: Panel, site: Site, seeded: None,
                                                       instances: sqlite3.Connection) -> None:
    panel.login("admin")
    panel.d.set_window_size(390, 844)
    try:
        assert panel.d.execute_script("return window.innerWidth") == 390
        pages = [("/users", "users", "#users tr[data-user]"),
                 ("/tokens", "tokens", "#tokens tr[data-token]"),
                 ("/audit", "audit", "#audit tr[data-entry]"),
                 ("/cluster", "cluster", "#cluster tr[data-instance]"),
                 ("/notifications", "notifications", "#notify-deliveries tr")]
        for path, name, drawn in pages:
            panel.open(path, name)
            panel.until(lambda d, drawn=drawn: panel.css(drawn), f"{path} drawn")
            assert panel.d.execute_script(OVERFLOWING) == [], path
    finally:
        panel.d.set_window_size(1400, 1000)
