"""How `make test` splits the suite among its xdist workers (tests/conftest.py): a file named
in the timed lists that does not exist would silently run at low priority beside the others."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import (
    TIMED_FILES,
    TIMED_GROUP,
    TIMED_LIGHT_FILES,
    TIMED_LIGHT_GROUP,
    TIMED_SECOND_FILES,
    TIMED_SECOND_GROUP,
    is_timed_path,
    work_unit,
)

TESTS = Path(__file__).resolve().parent.parent


def test_every_timed_file_named_exists() -> None:
    present = {path.name for path in TESTS.rglob("test_*.py")}
    assert set(TIMED_FILES) | set(TIMED_LIGHT_FILES) | set(TIMED_SECOND_FILES) <= present


@pytest.mark.parametrize(("names", "unit"), [(TIMED_LIGHT_FILES, TIMED_LIGHT_GROUP),
                                              (TIMED_SECOND_FILES, TIMED_SECOND_GROUP)],
                         ids=["light", "second-heavy"])
def test_a_named_file_is_timed_and_in_its_unit(names: tuple[str, ...], unit: str) -> None:
    for name in names:
        [path] = TESTS.rglob(name)
        nodeid = f"{path.relative_to(TESTS.parent).as_posix()}::test_x"
        assert is_timed_path(nodeid)
        assert work_unit(nodeid) == unit


def test_units_of_the_other_tests() -> None:
    assert work_unit("tests/faults/test_worker_faults.py::test_x[pg18-embedded]") == TIMED_GROUP
    assert work_unit("tests/e2e/test_cluster_e2e.py::test_x") == TIMED_GROUP
    assert work_unit("tests/faults/test_soak.py::test_x") == TIMED_SECOND_GROUP
    assert work_unit("tests/browser/test_panel_browser.py::test_x") == \
        "tests/browser/test_panel_browser.py"
    assert work_unit("tests/unit/test_retry.py::test_x") == "tests/unit/test_retry.py::test_x"
    assert not is_timed_path("tests/unit/test_retry.py::test_x")
