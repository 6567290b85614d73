"""Placement on a real cluster (issue 21, item 2): two `ql worker` processes, one started with
`--labels gpu=a100,region=eu` and one with none, and Runs of three tasks admitted by run now:
one that requires nothing, one that `--requires gpu`, one that `--requires region=us`.

Every Run of the gpu task is executed by the labelled worker; the plain ones by either; the
one no live worker can take stays queued, never leased, while the Runs admitted after it
pass it by and finish (the wait is for those Runs, not for a fixed time). `ql run show`
names what the waiting Run requires and that no live worker offers it, and the labelled
worker's /status shows its labels and its niceness. A task with a one-second CPU-time limit
that spins ends CPU_LIMIT on whichever worker took it (issue 21, item 4)."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

import pytest

from qinglong.domain.limits import ResourceLimits
from qinglong.domain.manual import ManualRequest
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.execution.cgroups import detect
from qinglong.storage.admission import RequestAdmissions
from qinglong.storage.admission.params import ManualRunParams
from qinglong.storage.definitions import DefinitionStore
from qinglong.storage.definitions.params import TaskPublishParams
from qinglong.storage.postgres.connection import SingleConnector
from qinglong.storage.postgres.driver import open_postgres
from qinglong.storage.runs import RunStore
from testkit.cluster import Worker
from tests.support.pg import PgTestDatabase
from tests.support.ql import wait_for
from tests.support.ql_process import run_ql

pytestmark = pytest.mark.slow

RUNS_EACH = 4


def test_runs_go_only_to_workers_whose_labels_meet_their_task(
        pg_db: PgTestDatabase, tmp_path: Path) -> None:
    admin, runtime = pg_db.url("ql_admin"), pg_db.url("ql_runtime")
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}

    def ql(*args: str, url: str = runtime) -> str:
        done = run_ql([*args, "--database-url", url],
                      timeout=60, env=env)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    # set-up and run now in process (the CLI's flags are tested elsewhere; here what counts
    # is what the workers do), one `ql` call to publish a task the way a user would
    ql("project", "create", "demo", url=admin)
    ql("task", "publish", "--project", "demo", "--task", "gpu", "--shell", "echo ok",
       "--requires=gpu", url=admin)
    admin_db = open_postgres(SingleConnector(admin))
    publisher = DefinitionStore(admin_db)
    for task, spec in (
            ("plain", CommandSpec(command=ShellCommand(command="echo ok"))),
            ("us", CommandSpec(command=ShellCommand(command="echo ok"), requires=("region=us",))),
            ("spin", CommandSpec(command=ShellCommand(command="exec sh -c 'while :; do :; done'"),
                                 limits=ResourceLimits(cpu_seconds=1)))):
        publisher.task_publish(TaskPublishParams(project_id="demo", task_id=task, name=task,
                                                 spec=spec))
    runtime_db = open_postgres(SingleConnector(runtime))
    admissions = RequestAdmissions(runtime_db)
    runs = RunStore(runtime_db, actor_id="test")

    def run_now(task: str, n: int) -> str:
        return admissions.run_admit_manual(ManualRunParams(request=ManualRequest(
            project_id="demo", task_id=task, request_id=f"{task}-{n}", actor="test"))).run_id

    waiting = run_now("us", 0)  # admitted first: every later Run is queued behind it
    spinning = run_now("spin", 0)
    gpu_runs = [run_now("gpu", n) for n in range(RUNS_EACH)]
    plain_runs = [run_now("plain", n) for n in range(RUNS_EACH)]
    workers = [
        Worker("gpu-box", pg_db.url("ql_worker"), tmp_path, poll_ms=200,
               extra=("--labels", "region=eu,gpu=a100", "--nice", "5")),
        Worker("plain-box", pg_db.url("ql_worker"), tmp_path, poll_ms=200),
    ]
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            worker.wait_ready()

        def status(run_id: str) -> str:
            return runs.run_get(run_id).run.status

        def all_finished() -> bool:
            return all(status(run_id) == "succeeded" for run_id in gpu_runs + plain_runs)

        wait_for(all_finished, 60, "the gpu and plain Runs to finish")
        wait_for(lambda: status(spinning) == "failed", 30,
                 "the spinning Run to be stopped at its CPU limit")
        [spun] = runs.run_get(spinning).attempts
        assert spun.error_code == "CPU_LIMIT", spun
        for run_id in gpu_runs:
            [attempt] = runs.run_get(run_id).attempts
            assert (attempt.worker_id or "").startswith("gpu-box:"), attempt
        held = runs.run_get(waiting)
        assert held.run.status == "queued" and held.run.requires == ("region=us",)
        assert all(a.worker_id is None for a in held.attempts), held
        printed = ql("run", "show", waiting)
        assert "requires   region=us" in printed, printed
        assert "waiting    no live worker offers region=us" in printed, printed
        with urllib.request.urlopen(f"http://127.0.0.1:{workers[0].port}/status",
                                    timeout=5) as answer:
            offered = json.loads(answer.read())
        assert offered["labels"] == {"gpu": "a100", "region": "eu"}
        assert (offered["nice"], offered["run_as"]) == (5, None)
        # a memory cgroup per command where this host lets the worker make them (root here)
        expected = "memory: a cgroup v" if detect() is not None else "setrlimit via prlimit"
        assert offered["limits"].startswith(expected), offered
        # each command's output was spooled in a file of its own, removed once shipped: the
        # ended Runs left neither files nor directories (a worker that ran nothing has no
        # spool; the gpu Runs ran on gpu-box)
        spools = [tmp_path / f"{worker.worker_id}.spool" for worker in workers]
        assert spools[0].is_dir()
        left = [p.name for spool in spools if spool.exists() for p in spool.iterdir()]
        assert left == [], left
    finally:
        for worker in workers:
            assert worker.stop() == 0
        admin_db.close()
        runtime_db.close()
