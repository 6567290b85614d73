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
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from testkit.cluster import Worker
from tests.support.pg import PgTestDatabase
from tests.support.ql import wait_for

pytestmark = pytest.mark.slow

RUNS_EACH = 4


def test_runs_go_only_to_workers_whose_labels_meet_their_task(
        pg_db: PgTestDatabase, tmp_path: Path) -> None:
    admin, runtime = pg_db.url("ql_admin"), pg_db.url("ql_runtime")
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}

    def ql(*args: str, url: str = runtime) -> str:
        done = subprocess.run([sys.executable, "-m", "qinglong", *args, "--database-url", url],
                              capture_output=True, text=True, timeout=60, check=False, env=env)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    ql("project", "create", "demo", url=admin)
    for task, requires in (("plain", ()), ("gpu", ("gpu",)), ("us", ("region=us",))):
        ql("task", "publish", "--project", "demo", "--task", task, "--shell", "echo ok",
           *(f"--requires={r}" for r in requires), url=admin)

    def run_now(task: str, n: int) -> str:
        made = json.loads(ql("task", "run", "--project", "demo", "--task", task,
                             "--request-id", f"{task}-{n}", "--json"))
        return str(made["id"])

    ql("task", "publish", "--project", "demo", "--task", "spin", "--cpu-limit", "1s",
       "--shell", "exec sh -c 'while :; do :; done'", url=admin)
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

        def show(run_id: str) -> dict[str, object]:
            return dict(json.loads(ql("run", "show", run_id, "--json")))

        def all_finished() -> bool:
            listed = json.loads(ql("run", "list", "--project", "demo", "--json"))
            done = {run["id"] for run in listed if run["status"] == "succeeded"}
            return done >= set(gpu_runs + plain_runs)

        wait_for(all_finished, 60, "the gpu and plain Runs to finish")
        wait_for(lambda: show(spinning)["run"]["status"] == "failed", 30,  # type: ignore[index]
                 "the spinning Run to be stopped at its CPU limit")
        [spun] = show(spinning)["attempts"]  # type: ignore[misc]
        assert spun["error_code"] == "CPU_LIMIT", spun
        for run_id in gpu_runs:
            shown = show(run_id)
            [attempt] = shown["attempts"]  # type: ignore[misc]
            assert attempt["worker"].startswith("gpu-box:"), attempt
        held = show(waiting)
        assert held["run"]["status"] == "queued"  # type: ignore[index]
        assert all(a["worker"] is None for a in held["attempts"]), held  # type: ignore[attr-defined]
        assert held["run"]["requires"] == ["region=us"]  # type: ignore[index]
        printed = ql("run", "show", waiting)
        assert "requires   region=us" in printed, printed
        assert "waiting    no live worker offers region=us" in printed, printed
        with urllib.request.urlopen(f"http://127.0.0.1:{workers[0].port}/status",
                                    timeout=5) as answer:
            status = json.loads(answer.read())
        assert status["labels"] == {"gpu": "a100", "region": "eu"}
        assert (status["nice"], status["run_as"]) == (5, None)
        assert status["limits"].startswith("setrlimit via prlimit"), status
    finally:
        for worker in workers:
            assert worker.stop() == 0
