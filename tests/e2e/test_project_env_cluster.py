"""Project environments on a real cluster (issue 22, item 3): a secret set as ql_admin with the
database's key reaches the command of a `ql worker` (as ql_worker) that was started with the
key, all or nothing -- a worker started without it fails the Run ENVIRONMENT_UNAVAILABLE and
never starts the command -- and the Attempt records the environment revision it ran with."""

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
from tests.support.pg import PgTestDatabase
from tests.support.ql import wait_for
from tests.support.ql_process import run_ql

pytestmark = pytest.mark.slow

SECRET = "cluster-secret-value"


def test_a_keyed_worker_gets_the_secret_and_a_keyless_one_starts_nothing(
        pg_db: PgTestDatabase, tmp_path: Path) -> None:
    admin, runtime = pg_db.url("ql_admin"), pg_db.url("ql_runtime")
    base = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}

    def ql(*args: str, url: str | None = admin, **more: str) -> str:
        where = ("--database-url", url) if url is not None else ()
        done = run_ql([*args, *where],
                      timeout=60, env={**base, **more}, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    key = tmp_path / "ql.key"
    ql("secret", "new-key", "--out", str(key), url=None)
    (tmp_path / "token.txt").write_text(SECRET)
    ql("project", "create", "demo")
    ql("env", "set", "--project", "demo", "TOKEN", "--secret", "--value-file", "token.txt",
       QL_SECRET_KEY_FILE=str(key))
    ql("env", "set", "--project", "demo", "REGION", "--value", "eu-west")
    marker = tmp_path / "started"
    ql("task", "publish", "--project", "demo", "--task", "check", "--shell",
       f'touch {marker}; test "$TOKEN" = "{SECRET}" && echo "token ok in $REGION"')

    runtime_db = open_postgres(SingleConnector(runtime))
    runs = RunStore(runtime_db, actor_id="test")
    logs = LogStore(runtime_db)

    def run_now(request: str) -> str:
        shown = json.loads(ql("task", "run", "--project", "demo", "--task", "check",
                              "--request-id", request, "--json", url=runtime))
        return str(shown["id"])

    def ended(run_id: str) -> bool:
        return runs.run_get(run_id).run.status in ("succeeded", "failed")

    try:
        keyless = Worker("keyless", pg_db.url("ql_worker"), tmp_path, poll_ms=200)
        keyless.start()
        try:
            keyless.wait_ready()
            refused = run_now("without-key")
            wait_for(lambda: ended(refused), 60, "the keyless worker's Run to end")
        finally:
            assert keyless.stop() == 0
        [attempt] = runs.run_get(refused).attempts
        assert (attempt.status, attempt.error_code) == ("failed", "ENVIRONMENT_UNAVAILABLE")
        assert (attempt.error_summary or "").startswith("QL_SECRET_KEY_MISSING"), attempt
        assert not marker.exists()  # all or nothing: the command never started

        keyed = Worker("keyed", pg_db.url("ql_worker"), tmp_path, poll_ms=200,
                       env={"QL_SECRET_KEY_FILE": str(key)})
        keyed.start()
        try:
            keyed.wait_ready()
            good = run_now("with-key")
            wait_for(lambda: ended(good), 60, "the keyed worker's Run to end")
        finally:
            assert keyed.stop() == 0
        detail = runs.run_get(good)
        [ran] = detail.attempts
        text = b"".join(c.data for c in logs.log_read(ran.id)).decode()
        assert detail.run.status == "succeeded", (ran, text)
        assert text.strip() == "token ok in eu-west" and SECRET not in text
        assert ran.environment_revision == 2 and ran.environment_digest, ran
    finally:
        runtime_db.close()
