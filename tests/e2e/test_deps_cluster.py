"""A project's dependencies on a real cluster (issue 22, item 4), without a network: the set is
changed as ql_admin, `ql deps install` (as ql_runtime) admits the install Run that a `ql
worker` (as ql_worker) builds into its --deps-dir from a wheel built here (PIP_NO_INDEX and
PIP_FIND_LINKS in the project's environment), and a script task of the project then runs in
that environment, importing the package."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from qinglong.storage.postgres.connection import SingleConnector
from qinglong.storage.postgres.driver import open_postgres
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.logs import LogStore
from testkit.cluster import Worker
from tests.support.deps_packages import wheel
from tests.support.pg import PgTestDatabase
from tests.support.ql import wait_for
from tests.support.ql_process import run_ql

pytestmark = pytest.mark.slow


def test_a_worker_installs_the_set_and_scripts_run_in_it(pg_db: PgTestDatabase,
                                                         tmp_path: Path) -> None:
    admin, runtime = pg_db.url("ql_admin"), pg_db.url("ql_runtime")
    base = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}

    def ql(*args: str, url: str = admin) -> str:
        done = run_ql([*args, "--database-url", url],
                      timeout=60, env=base, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    wheels = tmp_path / "wheels"
    wheel(wheels, value="from the cluster")
    ql("project", "create", "demo")
    ql("env", "set", "--project", "demo", "PIP_NO_INDEX", "--value", "1")
    ql("env", "set", "--project", "demo", "PIP_FIND_LINKS", "--value", str(wheels))
    ql("deps", "add", "--project", "demo", "--python", "qltiny==1.0")
    (tmp_path / "job.py").write_text("import qltiny\nprint('job', qltiny.VALUE)\n")
    ql("script", "put", "--project", "demo", "job.py", "-f", "job.py")
    ql("task", "publish", "--project", "demo", "--task", "job", "--script", "job.py")

    runtime_db = open_postgres(SingleConnector(runtime))
    runs = RunStore(runtime_db, actor_id="test")
    logs = LogStore(runtime_db)

    def finished(run_id: str) -> str:
        wait_for(lambda: runs.run_get(run_id).run.status in ("succeeded", "failed"), 180,
                 f"Run {run_id} to end")
        detail = runs.run_get(run_id)
        text = b"".join(c.data for a in detail.attempts for c in logs.log_read(a.id)).decode()
        assert detail.run.status == "succeeded", text
        return text

    worker = Worker("deps", pg_db.url("ql_worker"), tmp_path, poll_ms=200,
                    extra=("--deps-dir", str(tmp_path / "deps")))
    worker.start()
    try:
        worker.wait_ready()
        installed = json.loads(ql("deps", "install", "--project", "demo", "--json",
                                  url=runtime))
        install_log = finished(installed["run"])
        assert "qltiny" in install_log, install_log
        ran = json.loads(ql("task", "run", "--project", "demo", "--task", "job", "--json",
                            url=runtime))["id"]
        assert finished(ran).strip().endswith("job from the cluster")
    finally:
        assert worker.stop() == 0
        runtime_db.close()
    assert any((tmp_path / "deps").rglob("qltiny*")), "the environment is in the worker's cache"
