"""Resource limits in the domain (domain/limits.py): sizes both ways, bounds, the spec's
canonical form (written only when set, so older digests stay), what a publish keeps, and
the prlimit options each limit becomes."""

from __future__ import annotations

import json
import signal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qinglong.domain.limits import (
    CPU_HARD_GRACE_S,
    MAX_MEMORY_BYTES,
    MIN_MEMORY_BYTES,
    ResourceLimits,
    format_size,
    parse_size,
    size_text,
    whole_seconds,
)
from qinglong.domain.publishing import TaskPatch, merged_task_spec
from qinglong.domain.task import CommandSpec, ShellCommand, parse_task_envelope
from qinglong.errors import InvalidInput
from qinglong.execution.command import exit_outcome
from qinglong.execution.identity import PRLIMIT, Identity

MiB = 1024**2


@pytest.mark.parametrize(("text", "size"), [
    ("512M", 512 * MiB), ("512MiB", 512 * MiB), ("2g", 2 * 1024**3), ("1T", 1024**4),
    ("64K", 65536), ("1048576", MiB), (" 3 G ", 3 * 1024**3), ("100B", 100)])
def test_sizes_read_with_binary_units(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "M", "1.5G", "-1M", "12 parsecs", "0x10M"])
def test_bad_sizes_are_refused(text: str) -> None:
    with pytest.raises(InvalidInput, match="512M"):
        parse_size(text)


@given(st.integers(min_value=1, max_value=2**50))
def test_a_size_written_out_reads_back_the_same(size: int) -> None:
    assert parse_size(size_text(size)) == size


def test_bounds_and_texts() -> None:
    assert format_size(512 * MiB) == "512 MiB" and format_size(1000) == "1000 bytes"
    for bad in ({"memory_bytes": MIN_MEMORY_BYTES - 1}, {"memory_bytes": MAX_MEMORY_BYTES + 1},
                {"cpu_seconds": 0}, {"cpu_seconds": True}):
        with pytest.raises(InvalidInput):
            ResourceLimits(**bad)  # type: ignore[arg-type]
    limits = ResourceLimits(memory_bytes=512 * MiB, cpu_seconds=600)
    assert limits.text() == "memory 512 MiB, CPU time 600 s"
    assert ResourceLimits().text() == "none" and ResourceLimits().empty
    assert whole_seconds(600_000) == 600
    with pytest.raises(InvalidInput, match="whole number"):
        whole_seconds(1500)


def test_the_spec_writes_limits_only_when_set() -> None:
    plain = CommandSpec(command=ShellCommand(command="true"))
    assert "limits" not in plain.config_json()
    bounded = CommandSpec(command=ShellCommand(command="true"),
                          limits=ResourceLimits(memory_bytes=64 * MiB))
    envelope = json.loads(json.dumps(bounded.envelope()))
    assert envelope["config"]["limits"] == {"memoryBytes": 64 * MiB}
    assert parse_task_envelope(envelope) == bounded
    for bad in ({}, {"memoryBytes": 64 * MiB, "swap": 1}, {"cpuSeconds": "10"}):
        envelope["config"]["limits"] = bad
        with pytest.raises(InvalidInput):
            parse_task_envelope(envelope)


def test_a_publish_keeps_sets_or_clears_each_limit() -> None:
    current = CommandSpec(command=ShellCommand(command="true"),
                          limits=ResourceLimits(memory_bytes=64 * MiB, cpu_seconds=10))
    kept = merged_task_spec(current, TaskPatch(timeout_ms=5_000)).limits
    assert kept == current.limits
    changed = merged_task_spec(current, TaskPatch(cpu_limit_s=20, clear_memory_limit=True))
    assert changed.limits == ResourceLimits(cpu_seconds=20)
    with pytest.raises(InvalidInput, match="not both"):
        TaskPatch(cpu_limit_s=5, clear_cpu_limit=True)


def test_limits_and_niceness_become_the_programs_that_set_them() -> None:
    limits = ResourceLimits(memory_bytes=64 * MiB, cpu_seconds=10)
    assert Identity().argv(["/bin/true"], ResourceLimits()) == ["/bin/true"]
    assert Identity(nice=5).argv(["/bin/true"], limits)[3:] == [
        PRLIMIT, f"--as={64 * MiB}:{64 * MiB}", f"--cpu=10:{10 + CPU_HARD_GRACE_S}", "--",
        "/bin/true"]


def test_sigxcpu_is_the_cpu_limit() -> None:
    outcome = exit_outcome(-signal.SIGXCPU)
    assert (outcome.error_code, outcome.error_summary) == (
        "CPU_LIMIT", "stopped at its CPU-time limit (SIGXCPU)")
    assert exit_outcome(-signal.SIGKILL).error_code == "KILLED_BY_SIGNAL"
