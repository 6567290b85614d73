"""Output streamed off the workers into the database (``Capabilities.logs_in_database``:
PostgreSQL; `ql serve` writes log files instead): fenced by the Attempt's lease, stored once
when sent twice, the tail trimmed to its budget with the head kept, and removed by retention
only once the Attempt ended long enough ago."""

from __future__ import annotations

from dataclasses import replace

import pytest

from qinglong.execution.logship import assemble
from qinglong.storage.runs.logs import LogStore
from qinglong.storage.runs.params import AttemptFinishParams, LogChunk
from tests.contract.conftest import PgBackend
from tests.contract.test_leases import SUCCEEDED, acquire, run_to_running
from tests.contract.test_runs import setup_definitions


@pytest.fixture
def pg(pg_backend: PgBackend) -> PgBackend:
    assert pg_backend.capabilities.logs_in_database
    setup_definitions(pg_backend)
    base = pg_backend.now_ms() // 1000 * 1000
    pg_backend.admit("demo", "t1", base - 3_000)
    pg_backend.admit("demo", "t2", base - 3_000)
    return pg_backend


def store(pg: PgBackend, role: str = "ql_worker") -> LogStore:
    return LogStore(pg.database(role, "contract-logs"))


def test_chunks_are_fenced_and_stored_once(pg: PgBackend) -> None:
    [lease] = acquire(pg, limit=1)
    run_to_running(pg, lease.fence)
    logs = store(pg)
    first = (LogChunk(seq=0, part="head", byte_offset=0, data=b"hello "),
             LogChunk(seq=1, part="head", byte_offset=6, data=b"world\n"))
    assert logs.log_append(lease.fence, first, keep_tail_from=0)
    assert logs.log_append(lease.fence, first, keep_tail_from=0)  # a resend after a lost reply
    assert assemble(logs.log_read(lease.fence.attempt_id)) == b"hello world\n"
    assert [c.seq for c in logs.log_read(lease.fence.attempt_id, after_seq=0)] == [1]
    stale = replace(lease.fence, token="someone-else")
    late = (LogChunk(seq=2, part="tail", byte_offset=12, data=b"zombie\n"),)
    assert not logs.log_append(stale, late, keep_tail_from=0)
    pg.lifecycle.attempt_finish(AttemptFinishParams(fence=lease.fence, outcome=SUCCEEDED))
    assert not logs.log_append(lease.fence, late, keep_tail_from=0)  # the lease ended
    assert assemble(logs.log_read(lease.fence.attempt_id)) == b"hello world\n"


def test_the_tail_is_trimmed_and_the_head_kept_with_a_marker(pg: PgBackend) -> None:
    [lease] = acquire(pg, limit=1)
    run_to_running(pg, lease.fence)
    logs = store(pg)
    head = LogChunk(seq=0, part="head", byte_offset=0, data=b"HEAD\n")
    tail = tuple(LogChunk(seq=n, part="tail", byte_offset=5 + 10 * (n - 1),
                          data=f"line {n:04d}\n".encode()) for n in range(1, 6))
    assert logs.log_append(lease.fence, (head, *tail), keep_tail_from=35)
    text = assemble(logs.log_read(lease.fence.attempt_id))
    assert text.startswith(b"HEAD\n")
    assert b"[qinglong: 30 bytes of output dropped here]" in text
    assert text.endswith(b"line 0004\nline 0005\n")
    assert b"line 0001" not in text


def test_retention_removes_only_output_of_attempts_ended_long_enough_ago(
        pg: PgBackend) -> None:
    old, running = acquire(pg, limit=2)
    for lease in (old, running):
        run_to_running(pg, lease.fence)
        assert store(pg).log_append(lease.fence, (
            LogChunk(seq=0, part="head", byte_offset=0, data=b"out\n"),), keep_tail_from=0)
    pg.lifecycle.attempt_finish(AttemptFinishParams(fence=old.fence, outcome=SUCCEEDED))
    control = store(pg, "ql_runtime")  # the reconciler's role prunes
    assert control.log_prune(retention_ms=86_400_000, limit=100) == 0  # ended just now
    pg.db.execute("UPDATE run_attempts SET finished_at_ms = finished_at_ms - 2 * 86400000 "
                  "WHERE id = %s", [old.fence.attempt_id])
    assert control.log_prune(retention_ms=86_400_000, limit=100) == 1
    assert store(pg).log_read(old.fence.attempt_id) == []
    assert len(store(pg).log_read(running.fence.attempt_id)) == 1  # still running: kept
