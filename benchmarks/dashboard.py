"""Dashboard benchmark (issue 23, item 2): how long the panel's dashboard takes to draw 1,000
triggers, a page at a time, and what one refresh costs the server, against the old dashboard's
request per trigger.

    python -m benchmarks.dashboard [--database sqlite|postgresql] [--triggers 1000]
                                   [--runs-per-trigger 60] [--repeat 5] [--json FILE]

Builds a SQLite file (or an embedded PostgreSQL, migrated with its roles) with ``--triggers``
yearly cron triggers (published through the product in one unit of work) and
``--runs-per-trigger`` ended Runs each (written past the product, as the benchmark's own
set-based SQL: succeeded, failed and skipped ones, with admission lags), starts `ql web` on it
(as ql_web on PostgreSQL) and drives headless chromium (Debian's, as the browser suite does)
logged in as a viewer. Per repetition, measured inside the page (performance.now(), the layout forced before
the clock is read):

- first page: from navigation start to the first page of triggers drawn (the
  ``ql-triggers-drawn`` mark dashboard.js sets), and the summary request's own duration;
- page turns: Next, from the click to the next page drawn, walking every page (50 a page, then
  200 a page): the median turn and the sum, i.e. every trigger drawn once;
- the API alone: GET /api/v1/triggers/summary (50 and 200 a page), and the old dashboard's
  refresh replayed (GET /triggers, then GET /runs?trigger=...&limit=50 for every trigger, four
  at a time, as panel.js did).

Prints a table (median and min-max over the repetitions) and writes JSON to benchmarks/results/.
Timing is reported here, never asserted in a test: the machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from psycopg.rows import dict_row

from benchmarks.report import Figure, Report, print_table, say, summarize
from qinglong.clock import SystemClock
from qinglong.storage.postgres.migrate import migrate as pg_migrate
from qinglong.storage.postgres.roles import provision_roles
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.migrate import migrate
from testkit.postgres import EmbeddedPostgres
from tests.browser.chromium import ensure_chromium, start_chromium
from tests.browser.panel_support import Panel, Site
from tests.support.many_triggers import seed_triggers
from tests.support.test_api_support import Http, make_people, start_server

PROJECT = "load"
FIGURES: list[Figure] = [
    ("first_page_ms", "first page (50) drawn from navigation", "ms"),
    ("first_summary_request_ms", "its summary request", "ms"),
    ("turn_50_ms", "Next, 50 a page (median turn)", "ms"),
    ("draw_50_ms", "  of which drawing the rows", "ms"),
    ("walk_50_ms", "every trigger, 50 a page (sum of turns)", "ms"),
    ("resize_200_ms", "page size 200 chosen, drawn", "ms"),
    ("turn_200_ms", "Next, 200 a page (median turn)", "ms"),
    ("draw_200_ms", "  of which drawing the rows", "ms"),
    ("walk_200_ms", "every trigger, 200 a page (sum)", "ms"),
    ("api_summary_50_ms", "GET /triggers/summary limit=50", "ms"),
    ("api_summary_200_ms", "GET /triggers/summary limit=200", "ms"),
    ("old_refresh_ms", "old refresh: a GET /runs per trigger", "ms"),
    ("old_refresh_requests", "old refresh: its requests", "count"),
]

# Click (or change) something, then wait for the triggers table to be drawn again with
# ``first`` as its first row; the layout is forced before the clock is read.
TURN_JS = """
var target = arguments[0], value = arguments[1], first = arguments[2];
var done = arguments[arguments.length - 1];
var table = document.getElementById('triggers');
var before = table.getAttribute('data-drawn');
var t0 = performance.now();
var node = document.getElementById(target);
if (value === null) { node.click(); }
else { node.value = value; node.dispatchEvent(new Event('change')); }
(function wait() {
  var row = table.tBodies[0].rows[0];
  if (table.getAttribute('data-drawn') !== before && row &&
      row.getAttribute('data-trigger') === first) {
    void table.offsetHeight;
    done([performance.now() - t0, Number(table.getAttribute('data-draw-ms'))]);
  } else { setTimeout(wait, 1); }
})();
"""


# ``per_trigger`` ended Runs of every trigger: 1 in 10 failed, 1 in 20 skipped by the overlap
# policy, admitted 0-999 ms after their occurrence (the same text on both databases)
SEED_RUNS = (
            "WITH RECURSIVE k(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM k WHERE n < {n}) "
            "INSERT INTO runs (id, project_id, task_id, task_revision, trigger_id, trigger_type,"
            " execution_origin, execution_owner, scheduled_for_ms, status, version,"
            " event_sequence, created_at_ms, started_at_ms, finished_at_ms, cancel_reason) "
            "SELECT t.trigger_id || '-' || k.n, t.project_id, t.task_id, '1', t.trigger_id,"
            " 'cron', 'scheduled', 'runtime', 1700000000000 + k.n * 60000, "
            " CASE WHEN k.n % 20 = 0 THEN 'cancelled' WHEN k.n % 10 = 0 THEN 'failed'"
            " ELSE 'succeeded' END, 3, 4, 1700000000000 + k.n * 60000 + (k.n * 37) % 1000,"
            " 1700000000000 + k.n * 60000 + 1000, 1700000000000 + k.n * 60000 + 2000,"
            " CASE WHEN k.n % 20 = 0 THEN 'policy' END "
            "FROM triggers t CROSS JOIN k")


@contextlib.contextmanager
def sqlite_database(folder: Path, triggers: int, runs: int) -> Iterator[tuple[str, str]]:
    """The URL to seed and make users with, and the one `ql web` serves."""
    path = folder / "ql.db"
    db = SqliteDatabase(path, create=True)
    try:
        migrate(db, SystemClock())
    finally:
        db.close()
    url = f"sqlite:///{path}"
    seed_triggers(url, PROJECT, triggers)
    with sqlite3.connect(path) as conn:
        conn.execute(SEED_RUNS.format(n=int(runs)))
    yield url, url


@contextlib.contextmanager
def postgres_database(folder: Path, triggers: int, runs: int) -> Iterator[tuple[str, str]]:
    server = EmbeddedPostgres(base_dir=folder / "pg", fsync=False).start()
    try:
        with server.connect() as conn:
            conn.execute("CREATE DATABASE qinglong")
        with server.connect(dbname="qinglong", row_factory=dict_row) as conn:
            provision_roles(conn)
            pg_migrate(conn)
        seed_triggers(server.dsn("ql_admin", "qinglong"), PROJECT, triggers)
        with server.connect(dbname="qinglong") as conn:
            conn.execute("SET search_path = qinglong, public")
            conn.execute(SEED_RUNS.format(n=int(runs)))
            conn.execute("ANALYZE")
        yield server.dsn("ql_admin", "qinglong"), server.dsn("ql_web", "qinglong")
    finally:
        server.cleanup()


def turn(panel: Panel, target: str, value: str | None, first: str) -> tuple[float, float]:
    """The whole turn (request, answer, drawing, layout) and the drawing alone, in ms."""
    took = panel.d.execute_async_script(TURN_JS, target, value, first)
    assert isinstance(took, list) and len(took) == 2, took
    return float(took[0]), float(took[1])


def walk(panel: Panel, names: list[str], size: int) -> list[tuple[float, float]]:
    """Next until the last page: the time of each turn, and of its drawing."""
    return [turn(panel, "dash-next", None, f"{PROJECT}/{names[start]}")
            for start in range(size, len(names), size)]


def in_browser(panel: Panel, names: list[str]) -> dict[str, float]:
    panel.open("/", "dashboard")
    panel.until(lambda d: d.execute_script(
        "return performance.getEntriesByName('ql-triggers-drawn').length") == 1,
        "the first page drawn", timeout=60)
    first = panel.d.execute_script(
        "var m = performance.getEntriesByName('ql-triggers-drawn')[0];"
        "var r = performance.getEntriesByType('resource').filter(function (e) {"
        "  return e.name.indexOf('/api/v1/triggers/summary') >= 0; })[0];"
        "return [m.startTime, r.responseEnd - r.startTime];")
    assert isinstance(first, list)
    turns_50 = walk(panel, names, 50)
    resize = turn(panel, "dash-limit", "200", f"{PROJECT}/{names[0]}")
    turns_200 = walk(panel, names, 200)
    return {"first_page_ms": float(first[0]), "first_summary_request_ms": float(first[1]),
            "turn_50_ms": statistics.median(t for t, _ in turns_50),
            "draw_50_ms": statistics.median(d for _, d in turns_50),
            "walk_50_ms": sum(t for t, _ in turns_50),
            "resize_200_ms": resize[0], "turn_200_ms": statistics.median(t for t, _ in turns_200),
            "draw_200_ms": statistics.median(d for _, d in turns_200),
            "walk_200_ms": resize[0] + sum(t for t, _ in turns_200)}


def timed(call: Any) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def over_http(site: Site, samples: int) -> dict[str, float]:
    http, auth = site.http, site.people.tokens["viewer"]
    found: dict[str, float] = {}
    for limit in (50, 200):
        found[f"api_summary_{limit}_ms"] = statistics.median(
            timed(lambda limit=limit: http.ok("GET", f"/api/v1/triggers/summary?limit={limit}",
                                               auth)) for _ in range(samples))

    def old_refresh() -> int:
        listed = http.ok("GET", "/api/v1/triggers?next=1", auth)
        paths = [f"/api/v1/runs?project={t['project']}&trigger={t['trigger']}&limit=50"
                 for t in listed]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda path: Http(http.port).ok("GET", path, auth), paths))
        return 1 + len(paths)

    requests = 0

    def replay() -> None:
        nonlocal requests
        requests = old_refresh()

    found["old_refresh_ms"] = timed(replay)
    found["old_refresh_requests"] = float(requests)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--triggers", type=int, default=1000)
    parser.add_argument("--runs-per-trigger", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--samples", type=int, default=20, help="API calls per figure")
    parser.add_argument("--json", type=Path, default=None)
    options = parser.parse_args()
    report = Report(f"dashboard-{options.database}")
    report.announce()
    ensure_chromium()
    with tempfile.TemporaryDirectory(prefix="ql-bench-dashboard-") as temporary:
        folder = Path(temporary)
        database = sqlite_database if options.database == "sqlite" else postgres_database
        started = time.perf_counter()
        with database(folder, options.triggers, options.runs_per_trigger) as (url, web_url):
            say(f"seeded {options.triggers} triggers and "
                f"{options.triggers * options.runs_per_trigger} Runs in "
                f"{time.perf_counter() - started:.1f} s")
            results = measure(folder, url, web_url, options)
    summary = summarize(results, FIGURES)
    print_table(summary, len(results), FIGURES,
                title=f"Dashboard: {options.triggers} triggers, {options.runs_per_trigger} Runs "
                      f"each, {options.database}, `ql web`, headless chromium")
    report.write(vars(options), summary, results, output=options.json)
    return 0


def measure(folder: Path, url: str, web_url: str, options: argparse.Namespace
            ) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    names = [f"t{n:04d}" for n in range(options.triggers)]
    people = make_people(web_url)
    server = start_server(["web", "--database-url", web_url, "--http", "127.0.0.1:0"],
                          folder / "web.log")
    try:
        driver = start_chromium(folder / "profile", timezone="UTC")
        try:
            site = Site(f"http://127.0.0.1:{server.port}", server, people)
            panel = Panel(driver, site, "bench")
            panel.login("viewer")
            for repetition in range(1, options.repeat + 1):
                result: dict[str, Any] = {"repetition": repetition}
                result.update(in_browser(panel, names))
                result.update(over_http(site, options.samples))
                say(f"repetition {repetition}: first page {result['first_page_ms']:.0f} ms, "
                    f"all {options.triggers} at 50 a page {result['walk_50_ms']:.0f} ms")
                results.append(result)
        finally:
            driver.quit()
    finally:
        server.stop()
    return results


if __name__ == "__main__":
    raise SystemExit(main())
