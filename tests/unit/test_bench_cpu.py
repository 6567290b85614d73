"""The benchmarks' CPU accounting: a worker's reaped commands given apart without being
counted twice, CPU per Run from shares of a CPU, context switches, and the spawn-only probe
(benchmarks/cpu.py, benchmarks/dispatch.py, benchmarks/harness.py)."""

from __future__ import annotations

import subprocess
import sys

from benchmarks.cpu import CpuSample, context_switches, cpu_share, switches_between
from benchmarks.dispatch import cpu_per_run
from benchmarks.harness import spawn_ceiling


def _sample(at: float, seconds: dict[str, float]) -> CpuSample:
    return CpuSample(at=at, seconds={"machine_total": at * 2, **seconds}, others={})


def test_a_workers_commands_are_shown_apart_but_not_counted_twice() -> None:
    before = _sample(10.0, {"worker-1": 0.0, "worker-1.children": 0.0, "postgres": 0.0,
                            "harness": 0.0, "machine": 0.0})
    after = _sample(20.0, {"worker-1": 3.0, "worker-1.children": 1.0, "postgres": 2.0,
                           "harness": 0.0, "machine": 8.0})
    share = cpu_share(before, after)
    assert share["worker-1"] == 30.0  # the worker with its commands
    assert share["worker-1.children"] == 10.0  # of which the commands
    # "other" is the machine's busy share less the worker (30 %) and postgres (20 %); the
    # commands are inside the worker's figure and are not taken off a second time
    assert share["other"] == max(0.0, round(share["machine"] - 50.0, 1))


def test_cpu_per_run_adds_control_workers_and_postgres_and_gives_the_commands_apart() -> None:
    share = {"control": 3.0, "worker-1": 15.0, "worker-1.children": 4.5, "worker-2": 15.0,
             "worker-2.children": 4.5, "postgres": 10.0, "harness": 7.0, "machine": 60.0,
             "other": 5.0}
    found = cpu_per_run(share, 100.0)
    assert found == {"total": 4.3, "commands": 0.9, "without_commands": 3.4}
    assert cpu_per_run(share, 0.0) == {}


def test_the_spawn_probe_counts_what_it_started_and_what_failed() -> None:
    ran = spawn_ceiling(("/bin/true",), 20, 2)
    assert ran["failed"] == 0 and ran["width"] == 2
    assert ran["cpu_ms_per_spawn"] >= ran["commands_cpu_ms_per_spawn"] >= 0
    failing = spawn_ceiling(("/bin/false",), 6, 2)
    assert failing["failed"] == 6


def test_context_switches_count_the_sleeps_of_a_process_and_none_once_it_is_gone() -> None:
    # a child that sleeps 50 times (each a voluntary switch), says so, and waits for stdin
    child = subprocess.Popen(
        [sys.executable, "-c", ("import sys, time\n"
         "for _ in range(50): time.sleep(0.001)\n"
         "print('slept', flush=True); sys.stdin.read()")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "slept\n"
        counted = context_switches(child.pid)
        assert counted is not None and counted >= 50
    finally:
        child.communicate("")
    assert context_switches(child.pid) is None  # reaped: no such process


def test_switches_between_two_samples_of_the_processes_tracked_apart() -> None:
    before = CpuSample(at=0.0, seconds={}, others={}, switches={"worker-1": 100, "worker-2": 7})
    after = CpuSample(at=1.0, seconds={}, others={}, switches={"worker-1": 160, "new": 3})
    assert switches_between(before, after) == {"worker-1": 60}
