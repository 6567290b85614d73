"""The browser suite's fixtures and hook.

``site``: `ql serve --http` on a fresh SQLite file with a viewer, an operator and an admin, and
``driver``: headless chromium in Asia/Shanghai, one of each per test module; ``panel``: the
browser on the panel for one test. The hook keeps each test's call outcome on the test item
(``panel_failed``), so ``panel`` can save a screenshot, the page and the browser console when
the test failed."""

from __future__ import annotations

from collections.abc import Generator, Iterator

import pytest
from selenium import webdriver

from qinglong.clock import SystemClock
from qinglong.storage.sqlite.connection import SqliteDatabase
from qinglong.storage.sqlite.migrate import migrate
from tests.browser.chromium import ensure_chromium, start_chromium
from tests.browser.panel_support import ARTIFACTS, VIEWER_ZONE, Panel, Site
from tests.support.test_api_support import make_people, start_server


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                        pytest.TestReport]:
    del call
    report = yield
    if report.when == "call":
        item.panel_failed = report.failed  # type: ignore[attr-defined]
    return report


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """`ql serve --http` on a fresh SQLite file, with a viewer, an operator and an admin."""
    folder = tmp_path_factory.mktemp("panel")
    path = folder / "ql.db"
    db = SqliteDatabase(path, create=True)
    try:
        migrate(db, SystemClock())
    finally:
        db.close()
    url = f"sqlite:///{path}"
    people = make_people(url)
    server = start_server(["serve", "--database-url", url, "--http", "127.0.0.1:0",
                           "--interval", "250ms"], folder / "serve.log")
    try:
        yield Site(f"http://127.0.0.1:{server.port}", server, people)
    finally:
        assert server.stop() == 0, server.log.read_text()


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    ensure_chromium()
    started = start_chromium(tmp_path_factory.mktemp("chromium") / "profile",
                             timezone=VIEWER_ZONE)
    try:
        yield started
    finally:
        started.quit()


@pytest.fixture
def panel(driver: webdriver.Chrome, site: Site, request: pytest.FixtureRequest) -> Iterator[Panel]:
    name = request.node.name.removeprefix("test_")[:60]
    for old in ARTIFACTS.glob(f"{name}-FAILED*") if ARTIFACTS.exists() else ():
        old.unlink()
    shown = Panel(driver, site, name)
    yield shown
    if getattr(request.node, "panel_failed", False):
        shown.leave_evidence()
