"""Git subscriptions on a real cluster (issue 22, item 2): a pull is a Run that only a worker
given --repos-url (offering ql-repos) takes -- a plain worker leaves it queued -- and that
worker's pull imports the branch with auto-tasks; the task a header made then runs the
imported content on a plain worker, which never sees the publishing URL."""

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
from tests.contract.test_repo_pulls import Origin
from tests.support.pg import PgTestDatabase
from tests.support.ql import wait_for
from tests.support.ql_process import run_ql

pytestmark = pytest.mark.slow

SCRIPT = ("# cron: * * * * * *\nimport os\n"
          "print('imported', 'repos' if 'ql_admin' in os.environ.get('QL_DATABASE_URL', '') "
          "else 'no url')\n")


def test_only_a_repos_worker_pulls_and_the_made_task_runs_anywhere(
        pg_db: PgTestDatabase, tmp_path: Path) -> None:
    admin, runtime = pg_db.url("ql_admin"), pg_db.url("ql_runtime")
    origin = Origin(tmp_path / "git")
    origin.commit({"jobs/hello.py": SCRIPT})
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}
    env["QL_DATABASE_URL"] = admin

    def ql(*args: str) -> str:
        done = run_ql([*args], timeout=60, env=env, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    ql("project", "create", "demo")
    ql("repo", "add", "--project", "demo", "jd", "--url", str(origin.bare), "--auto-tasks")
    runtime_db = open_postgres(SingleConnector(runtime))
    runs = RunStore(runtime_db, actor_id="test")
    logs = LogStore(runtime_db)
    plain = Worker("plain", pg_db.url("ql_worker"), tmp_path, poll_ms=200)
    puller = Worker("puller", pg_db.url("ql_worker"), tmp_path, poll_ms=200,
                    extra=("--repos-url", admin))
    plain.start()
    try:
        plain.wait_ready()
        # run now, as ql task run: as ql_runtime
        pull = json.loads(ql("repo", "pull", "--project", "demo", "jd", "--json",
                             "--database-url", runtime))["run"]
        # the plain worker offers no ql-repos: the pull waits for a worker that does
        wait_for(lambda: runs.run_get(pull).run.status == "queued"
                 and runs.run_get(pull).run.requires == ("ql-repos",), 10, "the queued pull")
        puller.start()
        try:
            puller.wait_ready()
            wait_for(lambda: runs.run_get(pull).run.status in ("succeeded", "failed"), 60,
                     "the pull to end")
            detail = runs.run_get(pull)
            [attempt] = detail.attempts
            text = b"".join(c.data for c in logs.log_read(attempt.id)).decode()
            assert detail.run.status == "succeeded", text
            assert (attempt.worker_id or "").startswith("puller:"), attempt
            assert "saved    jd/jobs/hello.py" in text and "task created" in text, text

            # (no control replica here to fire its trigger: run it now instead)
            made = json.loads(ql("task", "run", "--project", "demo", "--task", "jd-jobs-hello",
                                 "--json", "--database-url", runtime))["id"]
            wait_for(lambda: runs.run_get(made).run.status in ("succeeded", "failed"), 60,
                     "the Run of the task the header made")
            assert runs.run_get(made).run.status == "succeeded", runs.run_get(made).attempts
            [ran] = runs.run_get(made).attempts
            out = b"".join(c.data for c in logs.log_read(ran.id)).decode().strip()
            assert out in ("imported no url",), out  # a script never gets the publishing URL
        finally:
            assert puller.stop() == 0
    finally:
        assert plain.stop() == 0
        runtime_db.close()
