"""A project's dependencies on a real executor (issue 22, item 4; docs/dependencies.md),
without a network: pip finds a wheel built here (PIP_NO_INDEX, PIP_FIND_LINKS in the
task's environment) and npm installs a local tarball (a ``file:`` specifier).

An install Run builds the set's environments under the cache, keyed by its digest, its
output as the Run's log; a script Run of the project then runs in them (the venv's python3
first on PATH, NODE_PATH naming node_modules), and builds them first where they are
missing; a failed install fails the Run with its log, links nothing, and the environment of
the previous set keeps serving; two installs of one set at once build it once."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from qinglong.clock import SystemClock
from qinglong.domain.deps import DepSet, DepsRevision
from qinglong.domain.model import RunDetail
from qinglong.domain.task import CommandSpec, DepsInstallCommand, EnvEntry, ScriptCommand
from qinglong.execution.deps import INSTALLER
from qinglong.execution.executor import Executor
from qinglong.testing import FakeClock
from tests.conftest import SqliteStores
from tests.execution.test_local_executor import TERMINAL, admit, log_text
from tests.execution.test_script_tasks import fetcher, store
from tests.support.deps_packages import npm_tarball, wheel

pytestmark = pytest.mark.slow

WAIT_S = 180.0
PY_SCRIPT = b"import os, sys, qltiny\nprint('py', qltiny.VALUE, sys.prefix == os.environ['VIRTUAL_ENV'])\n"
JS_SCRIPT = b"console.log('js', require('qltinyjs'))\n"
PLAIN = b"import os; print('plain', 'VIRTUAL_ENV' in os.environ)\n"


class Project:
    """The project's revisions, newest first, as the store would answer an executor."""

    def __init__(self) -> None:
        self.revisions: list[DepsRevision] = []

    def set(self, deps: DepSet) -> str:
        self.revisions.insert(0, DepsRevision(
            project_id="demo", revision=len(self.revisions) + 1, deps=deps,
            digest=deps.digest, actor="t", created_at_ms=0))
        return deps.digest

    def lookup(self, project_id: str) -> list[DepsRevision]:
        assert project_id == "demo"
        return list(self.revisions)


Go = Callable[..., RunDetail]


@pytest.fixture
def packages(tmp_path: Path) -> dict[str, Path]:
    return {"wheels": wheel(tmp_path / "wheels").parent,
            "tgz": npm_tarball(tmp_path / "npm")}


@pytest.fixture
def go(sqlite_stores: SqliteStores, clock: FakeClock, tmp_path: Path,
       packages: dict[str, Path]) -> Iterator[tuple[Project, Go]]:
    """Admit one Run of a task of ``command`` and let an executor with a dependency cache
    run it to its end; the Run's detail."""
    project = Project()
    made: list[Executor] = []
    env = (EnvEntry(name="PIP_NO_INDEX", value="1"),
           EnvEntry(name="PIP_FIND_LINKS", value=str(packages["wheels"])))
    scripts = fetcher(store(PY_SCRIPT, JS_SCRIPT, PLAIN))

    def run(command: object, task: str) -> RunDetail:
        spec = CommandSpec(command=command, timeout_ms=600_000,  # type: ignore[arg-type]
                           environment=env)
        [run_id] = admit(sqlite_stores, clock, spec, task=task)
        executor = Executor(sqlite_stores.runs, SystemClock(), owner="deps",
                            log_dir=tmp_path / "logs", poll_interval_s=0.05, scripts=scripts,
                            deps=project.lookup, deps_dir=tmp_path / "cache")
        made.append(executor)
        executor.start()
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            detail = sqlite_stores.runs.run_get(run_id)
            if detail.run.status in TERMINAL:
                return detail
            time.sleep(0.05)
        raise AssertionError(f"run {run_id} did not end")

    yield project, run
    for executor in made:
        executor.stop(0.5)


def _script(content: bytes, path: str, interpreter: str) -> ScriptCommand:
    return ScriptCommand(path=path, digest=hashlib.sha256(content).hexdigest(),
                         interpreter=interpreter)


def test_an_install_run_builds_the_set_and_scripts_run_in_it(
        go: tuple[Project, Go], packages: dict[str, Path], tmp_path: Path) -> None:
    project, run = go
    digest = project.set(DepSet.of(["qltiny==1.*"], [f"qltinyjs@file:{packages['tgz']}"]))
    installed = run(DepsInstallCommand(), "deps-install")
    log = log_text(installed)
    assert installed.run.status == "succeeded", log
    assert f"sha256 {digest[:12]}" in log and "Successfully installed qltiny-1.0" in log, log
    cache = tmp_path / "cache"
    for language in ("python", "node"):
        assert (cache / language / digest).is_symlink(), language
        assert not list((cache / language).glob(".link-*"))
    py = run(_script(PY_SCRIPT, "a.py", "python3"), "py")
    assert py.run.status == "succeeded", log_text(py)
    assert log_text(py) == "py tiny True\n"  # nothing installed: the script's output alone
    js = run(_script(JS_SCRIPT, "b.js", "node"), "js")
    assert js.run.status == "succeeded", log_text(js)
    assert log_text(js) == "js tiny js\n"


def test_a_failed_install_fails_its_run_and_the_previous_set_keeps_serving(
        go: tuple[Project, Go], tmp_path: Path) -> None:
    project, run = go
    first = project.set(DepSet.of(["qltiny"]))
    # a script Run whose set this executor has not built builds it first, in its own Run
    py = run(_script(PY_SCRIPT, "a.py", "python3"), "py")
    log = log_text(py)
    assert py.run.status == "succeeded", log
    assert "are not installed on this host: installing them first" in log, log
    assert log.endswith("py tiny True\n"), log
    broken = project.set(DepSet.of(["qltiny", "no-such-package==9"]))
    failed = run(DepsInstallCommand(), "deps-install")
    log = log_text(failed)
    assert failed.run.status == "failed" and failed.attempts[0].exit_code == 125, log
    assert "No matching distribution found for no-such-package" in log, log
    assert "DEPS_INSTALL_FAILED" in log, log
    python = tmp_path / "cache" / "python"
    assert not (python / broken).exists() and not list(python.glob(f".build-{broken}-*"))
    assert (python / first).is_symlink()
    # while the set stays broken, scripts run in the previous set's environment (the
    # install that failed is not tried again by every script Run: ql deps install does)
    served = run(_script(PY_SCRIPT, "a.py", "python3"), "py-fallback")
    log = log_text(served)
    assert served.run.status == "succeeded", log
    assert "running in the environment of the earlier set r1" in log, log
    assert "No matching distribution" not in log and log.endswith("py tiny True\n"), log
    # the set goes back to the first: its environment is still there and serves at once
    project.set(DepSet.of(["qltiny"]))
    again = run(_script(PY_SCRIPT, "a.py", "python3"), "py2")
    assert again.run.status == "succeeded" and log_text(again) == "py tiny True\n"


def test_a_project_without_a_set_runs_its_scripts_as_before(go: tuple[Project, Go],
                                                             tmp_path: Path) -> None:
    _, run = go
    plain = run(_script(PLAIN, "p.py", "python3"), "plain")
    assert plain.run.status == "succeeded" and log_text(plain) == "plain False\n"
    installed = run(DepsInstallCommand(), "deps-install")
    assert installed.run.status == "succeeded", log_text(installed)
    assert "no dependency set: nothing to install" in log_text(installed)
    assert not (tmp_path / "cache").exists()


def test_two_installs_of_one_set_at_once_build_it_once(tmp_path: Path,
                                                       packages: dict[str, Path]) -> None:
    deps = DepSet.of(["qltiny"])
    argv = [sys.executable, "-m", INSTALLER, "--cache", str(tmp_path / "cache"),
            "--digest", deps.digest, "--revision", "1", "--python", "qltiny"]
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(packages["wheels"])}
    both = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=WAIT_S)[0] for p in both]
    assert [p.returncode for p in both] == [0, 0], outputs
    assert sum("python dependencies installed at" in out for out in outputs) == 1, outputs
    assert sum("Successfully installed" in out for out in outputs) == 1, outputs
    python = tmp_path / "cache" / "python"
    assert len(list(python.glob(f".build-{deps.digest}-*"))) == 1
    assert (python / deps.digest).is_symlink()
