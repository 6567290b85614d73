"""The browser suite's hook: each test's call outcome kept on the test item (``panel_failed``),
so its fixture can save a screenshot, the page and the browser console when the test failed."""

from __future__ import annotations

from collections.abc import Generator

import pytest


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                        pytest.TestReport]:
    del call
    report = yield
    if report.when == "call":
        item.panel_failed = report.failed  # type: ignore[attr-defined]
    return report
