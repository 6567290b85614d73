"""The dashboard at scale (issue 23, item 2), in a real browser against `ql serve --http` with
1,000 triggers: the first page is drawn from one summary request, the page asks nothing per
trigger (the requests it made are read from the browser's own resource timing), Next and
Previous walk the pages, the project filter keeps one project, a viewer sees it all with no
write control, and a viewer of one project sees that project's triggers only. How long the pages take to draw is measured by benchmarks/dashboard.py, not
asserted here."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from selenium.webdriver.support.ui import Select

from tests.browser.panel_support import PASSWORD, Panel, Site, migrated_sqlite, serving
from tests.support.many_triggers import seed_triggers, trigger_name

pytestmark = pytest.mark.slow

TRIGGERS = 1_000
PAGE = 50
# What the dashboard may ask for: once when it opens (the project list) and, per refresh, the
# summary page, the recent Runs, the processes and the queue
ONCE = "/api/v1/projects"
EACH_REFRESH = ("/api/v1/triggers/summary", "/api/v1/runs", "/api/v1/health", "/api/v1/queue")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """`ql serve --http` on a SQLite file holding 1,000 triggers of project ``load`` and one
    of project ``other``, with a viewer, an operator and an admin."""
    folder = tmp_path_factory.mktemp("dashboard")
    url = migrated_sqlite(folder)
    seed_triggers(url, "load", TRIGGERS)
    seed_triggers(url, "other", 1)
    with serving(folder, url, "--interval", "250ms") as site:
        yield site


def shown_triggers(panel: Panel) -> list[str]:
    found = panel.d.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('#triggers tr[data-trigger]'),"
        " function (r) { return r.getAttribute('data-trigger'); });")
    assert isinstance(found, list)
    return [str(name) for name in found]


def api_requests(panel: Panel) -> list[str]:
    """Every request to the API the page made since it loaded (path and query)."""
    found = panel.d.execute_script(
        "return performance.getEntriesByType('resource').map(function (e) { return e.name; });")
    assert isinstance(found, list)
    paths = []
    for name in found:
        parts = urlsplit(str(name))
        if parts.path.startswith("/api/v1/"):
            paths.append(parts.path + ("?" + parts.query if parts.query else ""))
    return paths


def page_of(panel: Panel, first: int, label: str) -> None:
    wanted = [f"load/{trigger_name(n)}" for n in range(first, first + PAGE)]
    panel.until(lambda d: shown_triggers(panel) == wanted and panel.text("dash-page") == label,
                f"triggers {wanted[0]} to {wanted[-1]} on {label}")


def test_a_thousand_triggers_are_drawn_a_page_at_a_time_with_no_request_per_trigger(
        panel: Panel) -> None:
    panel.login("viewer")
    panel.open("/", "dashboard")
    page_of(panel, 0, "Page 1")
    [first] = [r for r in panel.rows("triggers") if r[0] == "load/t0000"]
    assert first[1] == "noop" and "0 0 1 1 *" in first[2] and first[3] == "firing"
    assert (first[6], first[7], first[8]) == ("—", "—", "—")  # no Run yet
    assert panel.d.execute_script(
        "return performance.getEntriesByName('ql-triggers-drawn').length") == 1

    made = api_requests(panel)
    kinds = Counter(path.split("?")[0] for path in made)
    assert set(kinds) <= {ONCE, *EACH_REFRESH}, made
    assert kinds[ONCE] == 1, made
    refreshes = kinds["/api/v1/triggers/summary"]
    assert 1 <= refreshes <= 3, made  # one per refresh, every 5 s: a page drawn in its first
    for path in EACH_REFRESH:
        assert refreshes - 1 <= kinds[path] <= refreshes + 1, (path, made)
    assert not [p for p in made if "trigger=" in p], made  # nothing asked per trigger
    assert len(made) <= 1 + len(EACH_REFRESH) * (refreshes + 1), made

    # Next and Previous: one summary request per turn, the next 50 in order
    before = len(api_requests(panel))
    panel.by_id("dash-next").click()
    page_of(panel, PAGE, "Page 2")
    panel.by_id("dash-next").click()
    page_of(panel, 2 * PAGE, "Page 3")
    panel.by_id("dash-prev").click()
    page_of(panel, PAGE, "Page 2")
    turned = api_requests(panel)[before:]
    assert not [p for p in turned if "trigger=" in p], turned
    assert len([p for p in turned if p.startswith("/api/v1/triggers/summary")]) <= 3 + 2, turned
    # the pages are all there, in order: the last holds the last 50
    assert panel.by_id("dash-prev").is_enabled() and panel.by_id("dash-next").is_enabled()
    assert panel.shown("#dash-filter [data-needs], main button[data-needs]") == 0


def pick(panel: Panel, select_id: str, value: str) -> None:
    """Choose ``value`` in a <select> once the page has filled it in (by value: typing the
    next choice right after another one types on from it)."""
    panel.until(lambda d: panel.css(f'#{select_id} option[value="{value}"]'),
                f"the option {value!r} of #{select_id}")
    Select(panel.by_id(select_id)).select_by_value(value)


def test_the_project_filter_and_the_page_size(panel: Panel) -> None:
    panel.login("viewer")
    panel.open("/", "dashboard")
    page_of(panel, 0, "Page 1")
    pick(panel, "dash-project", "other")
    panel.until(lambda d: shown_triggers(panel) == ["other/t0000"], "the other project")
    assert panel.text("dash-page") == "Page 1" and not panel.by_id("dash-next").is_enabled()
    pick(panel, "dash-project", "load")
    page_of(panel, 0, "Page 1")
    pick(panel, "dash-limit", "200")
    wanted = [f"load/{trigger_name(n)}" for n in range(200)]
    panel.until(lambda d: shown_triggers(panel) == wanted, "200 triggers on a page")


def test_a_viewer_of_one_project_sees_its_triggers_only(panel: Panel, site: Site) -> None:
    site.http.ok("POST", "/api/v1/users", site.admin,
                 {"username": "olive", "role": "none", "password": PASSWORD}, (201, 409))
    site.http.ok("PUT", "/api/v1/projects/other/grants/olive", site.admin, {"role": "viewer"})
    panel.login("olive")
    panel.open("/", "dashboard")
    panel.until(lambda d: shown_triggers(panel) == ["other/t0000"], "the one project's trigger")
    assert not panel.by_id("dash-next").is_enabled()
    # the installation's queue and processes are not asked for: no refusal to show
    assert panel.text("queue-summary") == "Shown to those who may read every project."
    made = {path.split("?")[0] for path in api_requests(panel)}
    assert made <= {ONCE, "/api/v1/triggers/summary", "/api/v1/runs"}, made
    assert not panel.text("problem")
    assert panel.shown("main [data-needs]") == 0
