"""CappedLogPump keeps the head and the tail of a child's output; tail() reads a log's end."""

from __future__ import annotations

import io
import os
import random
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from qinglong.execution.logs import (
    DEFAULT_LOG_BYTES,
    MAX_LOG_BYTES,
    MIN_LOG_BYTES,
    CappedLogPump,
    drop_marker,
    sidecar_path,
    tail,
)

WAIT_S = 10.0


def pattern(size: int, seed: int = 7) -> bytes:
    """Bytes that never repeat in a way an ordering mistake could hide behind."""
    return random.Random(seed).randbytes(size)


class _SteppedRaw(io.RawIOBase):
    """A raw stream that hands out at most ``step`` bytes per read."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = memoryview(data)
        self._step = step
        self.reads = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        count = min(self._step, len(buffer), len(self._data))
        buffer[:count] = self._data[:count]
        self._data = self._data[count:]
        self.reads += 1
        return count


def stepped(data: bytes, step: int) -> io.BufferedReader:
    return io.BufferedReader(_SteppedRaw(data, step), buffer_size=step)


def run_pump(source: io.BufferedIOBase, path: Path, cap: int) -> CappedLogPump:
    pump = CappedLogPump(source, path, cap)
    pump.start()
    assert pump.join(WAIT_S)
    return pump


def expected_log(data: bytes, cap: int) -> bytes:
    head = cap // 2
    return data[:head] + drop_marker(len(data) - cap) + data[len(data) - (cap - head) :]


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.005)


class Pipe:
    """A real OS pipe: the pump reads one end, the test writes the other from a thread."""

    def __init__(self) -> None:
        read_fd, self._write_fd = os.pipe()
        self.source = os.fdopen(read_fd, "rb")
        self._writer: threading.Thread | None = None

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._write_fd, view) :]

    def write_in_background(self, data: bytes, close: bool = True) -> None:
        def feed() -> None:
            self.write(data)
            if close:
                self.close()

        self._writer = threading.Thread(target=feed, daemon=True)
        self._writer.start()

    def writer_finished(self) -> bool:
        assert self._writer is not None
        self._writer.join(WAIT_S)
        return not self._writer.is_alive()

    def close(self) -> None:
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1


@pytest.fixture
def pipe() -> Iterator[Pipe]:
    p = Pipe()
    yield p
    p.close()
    p.source.close()


def test_output_under_the_cap_is_kept_verbatim(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    data = pattern(1000)
    pump = run_pump(stepped(data, 64), log, cap=1024)
    assert log.read_bytes() == data
    assert (pump.written, pump.dropped, pump.error) == (1000, 0, None)
    assert not sidecar_path(log).exists()


def test_output_of_exactly_the_cap_has_no_marker(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    data = pattern(1024)
    pump = run_pump(stepped(data, 100), log, cap=1024)
    assert log.read_bytes() == data
    assert (pump.written, pump.dropped, pump.error) == (1024, 0, None)


def test_empty_output_makes_an_empty_log(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    pump = run_pump(io.BytesIO(b""), log, cap=1024)
    assert log.read_bytes() == b""
    assert (pump.written, pump.dropped, pump.error) == (0, 0, None)
    assert not sidecar_path(log).exists()


def test_a_log_made_by_the_caller_is_opened_only_when_output_comes(tmp_path: Path) -> None:
    """``created``: the caller made the file (`command.prepare_log`), so the pump opens it at
    the first output, and never for a command that prints nothing. Seen by removing the file
    in between: silence leaves it removed, output makes it again, in the caller's mode."""
    silent, talking = tmp_path / "silent.log", tmp_path / "talking.log"
    for log, data in ((silent, b""), (talking, b"said\n")):
        pump = CappedLogPump(io.BytesIO(data), log, 1024, created=True)
        pump.open()  # nothing opened yet
        assert not log.exists()
        pump.start()
        assert pump.join(WAIT_S)
        assert (pump.written, pump.dropped, pump.error) == (len(data), 0, None)
    assert not silent.exists()
    assert talking.read_bytes() == b"said\n"
    assert stat.S_IMODE(talking.stat().st_mode) == 0o600


def test_a_log_made_by_the_caller_and_gone_at_the_first_output_is_reported(
    tmp_path: Path,
) -> None:
    log = tmp_path / "run" / "attempt-1.log"  # its directory removed meanwhile (the pruner)
    pump = CappedLogPump(io.BytesIO(b"x" * 5000), log, 1024, created=True)
    pump.start()
    assert pump.join(WAIT_S)
    assert pump.error == f"cannot write log {log}: No such file or directory"
    assert (pump.written, pump.dropped) == (0, 5000)


@pytest.mark.parametrize(
    ("cap", "size", "step"),
    [
        pytest.param(1024, 1025, 64, id="one-byte-over"),
        pytest.param(1024, 1024 + 37, 1024, id="one-chunk-spans-head-and-tail"),
        pytest.param(1024, 10_000, 7, id="wraps-the-ring-many-times-small-chunks"),
        pytest.param(1024, 10_000, 300, id="wraps-the-ring-many-times-uneven-chunks"),
        pytest.param(1024, 10_000, 5000, id="chunks-larger-than-the-ring"),
        pytest.param(1024, 200_000, 200_000, id="one-huge-chunk"),
        pytest.param(1025, 7_777, 13, id="odd-cap"),
        pytest.param(3, 50, 4, id="tiny-cap"),
    ],
)
def test_output_over_the_cap_keeps_head_marker_and_tail(
    tmp_path: Path, cap: int, size: int, step: int
) -> None:
    log = tmp_path / "attempt-1.log"
    data = pattern(size)
    pump = run_pump(stepped(data, step), log, cap=cap)
    assert log.read_bytes() == expected_log(data, cap)
    assert (pump.written, pump.dropped, pump.error) == (cap, size - cap, None)
    assert not sidecar_path(log).exists()


def test_marker_counts_the_bytes_dropped(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    data = b"H" * 512 + b"x" * 4000 + b"T" * 512
    pump = run_pump(stepped(data, 100), log, cap=1024)
    assert log.read_bytes() == (
        b"H" * 512 + b"\n[qinglong: 4000 bytes of output dropped here]\n" + b"T" * 512
    )
    assert pump.dropped == 4000


def test_a_real_pipe_of_a_megabyte_through_a_small_cap(tmp_path: Path, pipe: Pipe) -> None:
    log = tmp_path / "attempt-1.log"
    data = pattern(1024 * 1024 + 3)
    pump = CappedLogPump(pipe.source, log, cap=10_000)
    pump.start()
    pipe.write_in_background(data)
    assert pipe.writer_finished()
    assert pump.join(WAIT_S)
    assert log.read_bytes() == expected_log(data, 10_000)
    assert (pump.written, pump.dropped, pump.error) == (10_000, len(data) - 10_000, None)


def test_head_is_live_and_tail_waits_in_a_bounded_sidecar(tmp_path: Path, pipe: Pipe) -> None:
    log = tmp_path / "attempt-1.log"
    ring = sidecar_path(log)
    data = pattern(5000)
    pump = CappedLogPump(pipe.source, log, cap=1024)
    pump.start()

    pipe.write(data[:300])
    wait_until(lambda: log.exists() and log.read_bytes() == data[:300], "the first output")
    assert not ring.exists()  # nothing beyond the head yet

    pipe.write(data[300:4000])
    wait_until(lambda: pump.dropped == 4000 - 1024, "the overflow to reach the ring")
    assert log.read_bytes() == data[:512]  # the head only, while the child runs
    assert ring.stat().st_size == 512  # the ring is on disk and never grows past its share
    assert pump.join(0.01) is False  # still waiting for more output

    pipe.write(data[4000:])
    pipe.close()
    assert pump.join(WAIT_S)
    assert log.read_bytes() == expected_log(data, 1024)
    assert not ring.exists()


def test_a_stale_sidecar_from_a_crash_is_overwritten(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    sidecar_path(log).write_bytes(b"stale" * 1000)
    data = pattern(3000)
    pump = run_pump(stepped(data, 100), log, cap=1024)
    assert log.read_bytes() == expected_log(data, 1024)
    assert pump.error is None
    assert not sidecar_path(log).exists()


def assert_drained_with_error(
    pump: CappedLogPump, pipe: Pipe, size: int, path: Path, reason: str
) -> None:
    assert pipe.writer_finished(), "the pump stopped reading: a child would block on its pipe"
    assert pump.join(WAIT_S)
    assert pump.error == f"cannot write log {path}: {reason}"
    assert (pump.written, pump.dropped) == (0, size)
    assert pipe.source.closed


def test_a_missing_directory_is_reported_and_the_output_drained(tmp_path: Path, pipe: Pipe) -> None:
    log = tmp_path / "gone" / "attempt-1.log"
    data = pattern(1024 * 1024)  # far more than a pipe buffer holds
    pump = CappedLogPump(pipe.source, log, cap=2048)
    pump.start()
    pipe.write_in_background(data)
    assert_drained_with_error(pump, pipe, len(data), log, "No such file or directory")
    assert not log.parent.exists()


def test_a_file_where_the_directory_should_be_is_reported(tmp_path: Path, pipe: Pipe) -> None:
    (tmp_path / "logs").write_text("not a directory")
    log = tmp_path / "logs" / "attempt-1.log"
    data = pattern(300_000)
    pump = CappedLogPump(pipe.source, log, cap=2048)
    pump.start()
    pipe.write_in_background(data)
    assert_drained_with_error(pump, pipe, len(data), log, "Not a directory")


def test_a_full_disk_is_reported_and_the_output_drained(pipe: Pipe) -> None:
    log = Path("/dev/full")  # opens fine; every write fails with ENOSPC
    data = pattern(300_000)
    pump = CappedLogPump(pipe.source, log, cap=2048)
    pump.start()
    pipe.write_in_background(data)
    assert_drained_with_error(pump, pipe, len(data), log, "No space left on device")
    assert not sidecar_path(log).exists()


def test_a_sidecar_that_cannot_be_written_keeps_the_head_and_drops_the_tail(
    tmp_path: Path, pipe: Pipe
) -> None:
    log = tmp_path / "attempt-1.log"
    ring = sidecar_path(log)
    ring.mkdir()  # a directory in the sidecar's place
    data = pattern(300_000)
    pump = CappedLogPump(pipe.source, log, cap=2048)
    pump.start()
    pipe.write_in_background(data)
    assert pipe.writer_finished()
    assert pump.join(WAIT_S)
    assert pump.error == f"cannot write log tail {ring}: Is a directory"
    assert log.read_bytes() == data[:1024] + drop_marker(len(data) - 1024)
    assert (pump.written, pump.dropped) == (1024, len(data) - 1024)
    assert ring.is_dir()  # not ours: left alone


def test_a_negative_cap_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="negative"):
        CappedLogPump(io.BytesIO(b""), tmp_path / "a.log", cap=-1)


def test_the_limits_are_ordered() -> None:
    assert (MIN_LOG_BYTES, DEFAULT_LOG_BYTES, MAX_LOG_BYTES) == (1024, 1024**2, 1024**3)


def test_tail_returns_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    log.write_bytes(b"one\ntwo\nthree\nfour\n")
    assert tail(log, 2) == ["three", "four"]
    assert tail(log, 10) == ["one", "two", "three", "four"]
    assert tail(log, 0) == []


def test_tail_reads_at_most_max_bytes_from_the_end(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    log.write_bytes(b"first line\nsecond\nlast\n")
    assert tail(log, 10, max_bytes=12) == ["second", "last"]


def test_tail_of_a_capped_log_shows_the_last_output(tmp_path: Path) -> None:
    log = tmp_path / "attempt-1.log"
    data = b"".join(b"line %d\n" % n for n in range(5000))
    run_pump(stepped(data, 4096), log, cap=1024)
    assert tail(log, 2) == ["line 4998", "line 4999"]


def test_tail_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert tail(tmp_path / "nothing.log", 5) == []


def test_old_log_files_are_pruned_and_recent_ones_kept(tmp_path: Path) -> None:
    from qinglong.execution.logs import prune_log_dir

    old_run, new_run = tmp_path / "run-old", tmp_path / "run-new"
    old_run.mkdir()
    new_run.mkdir()
    (old_run / "attempt-1.log").write_text("old\n")
    (old_run / "attempt-2.log").write_text("old\n")
    (new_run / "attempt-1.log").write_text("new\n")
    day_ms = 86_400_000
    now_ms = 100 * day_ms
    for path in old_run.iterdir():
        os.utime(path, ((now_ms - 20 * day_ms) / 1000, (now_ms - 20 * day_ms) / 1000))
    os.utime(new_run / "attempt-1.log", (now_ms / 1000, now_ms / 1000))
    assert prune_log_dir(tmp_path, now_ms - 14 * day_ms, limit=1) == 1  # a bounded pass
    assert prune_log_dir(tmp_path, now_ms - 14 * day_ms) == 1
    assert not old_run.exists()  # its directory went with its last file
    assert (new_run / "attempt-1.log").read_text() == "new\n"
    assert prune_log_dir(tmp_path / "missing", now_ms) == 0


def test_a_fresh_empty_run_directory_is_not_pruned_but_an_old_one_is(tmp_path: Path) -> None:
    """An executor makes a new Attempt's directory and then its file: a pass between the
    two must not take the directory (the Run would fail LOG_UNWRITABLE)."""
    from qinglong.execution.logs import prune_log_dir

    fresh, stale = tmp_path / "run-fresh", tmp_path / "run-stale"
    fresh.mkdir()
    stale.mkdir()
    day_ms = 86_400_000
    now_ms = 100 * day_ms
    os.utime(fresh, (now_ms / 1000, now_ms / 1000))
    os.utime(stale, ((now_ms - 20 * day_ms) / 1000, (now_ms - 20 * day_ms) / 1000))
    assert prune_log_dir(tmp_path, now_ms - 14 * day_ms) == 0
    assert fresh.is_dir() and not stale.exists()


def test_preparing_a_log_survives_its_directory_being_pruned_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from qinglong.execution import command
    from qinglong.execution.command import prepare_log

    create = command.private_file
    removed: list[Path] = []

    def pruned_first(path: Path) -> None:
        if not removed:  # the pruner takes the new, empty directory before the file exists
            removed.append(path.parent)
            path.parent.rmdir()
        create(path)

    monkeypatch.setattr(command, "private_file", pruned_first)
    lease = SimpleNamespace(fence=SimpleNamespace(run_id="run-1"), attempt=2)
    path = prepare_log(tmp_path, lease)  # type: ignore[arg-type]
    assert path == tmp_path / "run-1" / "attempt-2.log" and path.is_file()
    assert removed == [tmp_path / "run-1"]


def test_a_spool_file_goes_straight_into_the_spool_and_a_missing_spool_is_made(
        tmp_path: Path) -> None:
    from types import SimpleNamespace

    from qinglong.execution.command import prepare_log

    lease = SimpleNamespace(fence=SimpleNamespace(run_id="run-1"), attempt=2)
    spool = tmp_path / "worker.spool"
    spool.mkdir()
    path = prepare_log(spool, lease, spool=True)  # type: ignore[arg-type]
    assert path == spool / "run-1.attempt-2.log" and path.is_file()
    assert [p.name for p in spool.iterdir()] == ["run-1.attempt-2.log"]  # no Run directory
    path.unlink()
    spool.rmdir()  # removed behind the worker's back: made again, the owner's alone
    again = prepare_log(spool, lease, spool=True)  # type: ignore[arg-type]
    assert again == path and again.is_file()
    assert spool.stat().st_mode & 0o777 == 0o700


def test_a_private_file_is_made_the_owners_alone_and_an_existing_one_is_kept(
        tmp_path: Path) -> None:
    from qinglong.execution.logs import private_file

    path = tmp_path / "attempt-1.log"
    old_mask = os.umask(0)
    try:
        private_file(path)
    finally:
        os.umask(old_mask)
    assert path.read_bytes() == b"" and stat.S_IMODE(path.stat().st_mode) == 0o600
    path.write_bytes(b"earlier output\n")
    private_file(path)  # a retried step: what the log holds stays
    assert path.read_bytes() == b"earlier output\n"
