"""A script task on a real cluster (issue 22, item 1): a `ql worker` process, connected as
ql_worker (which may read script content by digest and nothing else of the script tables),
runs the content each Run pinned -- a Run admitted before a save runs the old content, one
admitted after runs the new -- and content changed in the database after it was saved is
refused with SCRIPT_DIGEST_MISMATCH instead of being run."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qinglong.domain.manual import ManualRequest
from qinglong.storage.admission import RequestAdmissions
from qinglong.storage.admission.params import ManualRunParams
from qinglong.storage.postgres.connection import SingleConnector
from qinglong.storage.postgres.driver import open_postgres
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.logs import LogStore
from testkit.cluster import Worker
from tests.support.pg import PgTestDatabase
from tests.support.ql import wait_for
from tests.support.ql_process import run_ql

pytestmark = pytest.mark.slow


def test_a_worker_runs_exactly_the_pinned_content(pg_db: PgTestDatabase, tmp_path: Path) -> None:
    admin, runtime = pg_db.url("ql_admin"), pg_db.url("ql_runtime")
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}
    env["QL_DATABASE_URL"] = admin

    def ql(*args: str) -> str:
        done = run_ql([*args], timeout=60, env=env, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    ql("project", "create", "demo")
    (tmp_path / "job.py").write_text("import sys\nprint('v1', *sys.argv[1:])\n")
    ql("script", "put", "--project", "demo", "tools/job.py", "-f", "job.py")
    ql("task", "publish", "--project", "demo", "--task", "job", "--script", "tools/job.py",
       "--", "x")
    (tmp_path / "other.sh").write_text("echo other\n")
    ql("script", "put", "--project", "demo", "other.sh", "-f", "other.sh")
    ql("task", "publish", "--project", "demo", "--task", "other", "--script", "other.sh")

    runtime_db = open_postgres(SingleConnector(runtime))
    admissions = RequestAdmissions(runtime_db)
    runs = RunStore(runtime_db, actor_id="test")
    logs = LogStore(runtime_db)

    def run_now(task: str, n: int) -> str:
        return admissions.run_admit_manual(ManualRunParams(request=ManualRequest(
            project_id="demo", task_id=task, request_id=f"{task}-{n}", actor="test"))).run_id

    before = run_now("job", 0)
    (tmp_path / "job.py").write_text("import sys\nprint('v2', *sys.argv[1:])\n")
    ql("script", "put", "--project", "demo", "tools/job.py", "-f", "job.py")
    after = run_now("job", 1)
    # the shell script's stored bytes change behind qinglong's back (same length)
    pg_db.execute("UPDATE script_blobs SET content = convert_to('echo OTHER\n', 'UTF8') "
                  "WHERE content = convert_to('echo other\n', 'UTF8')")
    tampered = run_now("other", 0)

    worker = Worker("scripts", pg_db.url("ql_worker"), tmp_path, poll_ms=200)
    worker.start()
    try:
        worker.wait_ready()

        def ended(run_id: str) -> bool:
            return runs.run_get(run_id).run.status in ("succeeded", "failed")

        wait_for(lambda: all(ended(r) for r in (before, after, tampered)), 60,
                 "the three Runs to end")
    finally:
        assert worker.stop() == 0
    try:
        for run_id, expected in ((before, "v1 x"), (after, "v2 x")):
            detail = runs.run_get(run_id)
            assert detail.run.status == "succeeded", detail.attempts
            [attempt] = detail.attempts
            text = b"".join(c.data for c in logs.log_read(attempt.id)).decode()
            assert text.strip() == expected, text
        [refused] = runs.run_get(tampered).attempts
        assert refused.error_code == "SCRIPT_DIGEST_MISMATCH", refused
        # the spool held each Attempt's output and script only while it ran: nothing is left
        # behind, not even an empty Run directory
        spool = tmp_path / "scripts.spool"
        assert spool.is_dir() and list(spool.iterdir()) == []
    finally:
        runtime_db.close()
