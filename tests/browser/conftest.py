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

from tests.browser.chromium import ensure_chromium, start_chromium
from tests.browser.panel_support import (
    ARTIFACTS,
    VIEWER_ZONE,
    Panel,
    Site,
    migrated_sqlite,
    serving,
)


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
    with serving(folder, migrated_sqlite(folder), "--interval", "250ms") as site:
        yield site


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
