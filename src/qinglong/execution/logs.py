"""Per-attempt log files with a size cap that keeps both the head and the tail of the output.

:class:`CappedLogPump` copies a child's combined stdout/stderr into its log file:

- The first ``cap // 2`` bytes (the head) go to the log as they arrive, unbuffered, so anyone
  following the file sees the early output live.
- Everything after the head passes through a ring holding the last ``cap - cap // 2`` bytes.
  The ring lives on disk in a sidecar file next to the log (``<log>.tail``, see
  :func:`sidecar_path`) and is written circularly, so memory stays at one read chunk whatever
  the cap (up to :data:`MAX_LOG_BYTES`).
- At end of output the ring is appended to the log, oldest byte first, and the sidecar is
  removed. If nothing was dropped the log is the output verbatim; otherwise one marker line
  (:func:`drop_marker`) between head and tail says how many bytes were dropped there. The log
  never holds more than ``cap`` bytes of output; the marker comes on top.

If the parent process dies while the child runs, the log keeps the head only and the sidecar
may be left behind, holding the latest output in ring order (not rotated). Nothing reads or
removes a stale sidecar; it is safe to delete.

Logs hold what commands printed, which may be secret: the log directories are made readable by
their owner alone (``private_dir``, mode 0700) and the files created in them too
(``private_opener``, mode 0600); a directory or file that exists keeps its mode.

A log or sidecar that cannot be opened or written never stops the pump: it goes on reading
the child's output and discarding what it cannot keep, so the child never blocks on a full
pipe, and :attr:`CappedLogPump.error` names the path and the operating system's reason.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

MIN_LOG_BYTES = 1024
MAX_LOG_BYTES = 1024 * 1024 * 1024
DEFAULT_LOG_BYTES = 1024 * 1024
DEFAULT_LOG_RETENTION_DAYS = 14
MAX_LOG_RETENTION_DAYS = 3650
TAIL_SUFFIX = ".tail"
_CHUNK = 64 * 1024
DIR_MODE, FILE_MODE = 0o700, 0o600


def private_opener(path: str, flags: int) -> int:
    """``open(..., opener=private_opener)``: a file it creates is the owner's alone."""
    return os.open(path, flags, FILE_MODE)


def private_dir(path: Path) -> None:
    """Make ``path`` and its missing parents, each the owner's alone (OSError as mkdir)."""
    try:  # the usual case, one call: a new Run's directory in a log directory that exists
        os.mkdir(path, DIR_MODE)
        return
    except FileExistsError:
        return
    except FileNotFoundError:
        pass  # a parent is missing too
    missing: list[Path] = []
    while not path.exists():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=DIR_MODE)


def private_file(path: Path) -> None:
    """Create ``path`` empty, the owner's alone, unless it exists (one open: what exists is
    left as it is, not truncated)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, FILE_MODE))


def sidecar_path(path: Path) -> Path:
    """Where the tail ring of the log at ``path`` is kept while the child runs."""
    return path.with_name(path.name + TAIL_SUFFIX)


def drop_marker(dropped: int) -> bytes:
    """The line written between head and tail when ``dropped`` bytes were left out."""
    return f"\n[qinglong: {dropped} bytes of output dropped here]\n".encode()


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _write_some(handle: io.FileIO, data: memoryview) -> int:
    """One write of ``data``; how many bytes went (at least one), or OSError."""
    count = handle.write(data)
    if not count:
        raise OSError(errno.EIO, "short write")
    return count


def _write_all(handle: io.FileIO, data: memoryview) -> None:
    done = 0
    while done < len(data):
        done += _write_some(handle, data[done:])


class _TailRing:
    """The most recent ``capacity`` bytes pushed, kept circularly in a sidecar file."""

    def __init__(self, path: Path, capacity: int) -> None:
        self.path = path
        self.capacity = capacity
        self.size = 0  # bytes held, at most capacity
        self._pos = 0  # where the next byte goes; the oldest byte once the ring is full
        self._file: io.FileIO | None = None  # created by the first push
        self._abandoned = False

    def push(self, data: memoryview) -> None:
        """Keep the last ``capacity`` bytes of ``data``; OSError abandons the ring."""
        if self._abandoned or not self.capacity:
            return
        try:
            if self._file is None:
                self._file = open(self.path, "w+b", buffering=0,  # noqa: SIM115 -- remove() closes
                                  opener=private_opener)
            keep = data[len(data) - self.capacity :] if len(data) > self.capacity else data
            first = keep[: self.capacity - self._pos]
            self._file.seek(self._pos)
            _write_all(self._file, first)
            if len(first) < len(keep):
                self._file.seek(0)
                _write_all(self._file, keep[len(first) :])
        except OSError:
            self.abandon()
            raise
        self._pos = (self._pos + len(keep)) % self.capacity
        self.size = min(self.capacity, self.size + len(keep))

    def abandon(self) -> None:
        """Give up on the ring: everything it held, and all later pushes, is dropped."""
        self._abandoned = True
        self.size = 0
        self._pos = 0

    def blocks(self) -> Iterator[bytes]:
        """The bytes held, oldest first, in chunks; OSError if the sidecar cannot be read."""
        if self._file is None or not self.size:
            return
        full = self.size == self.capacity
        spans = [(self._pos, self.capacity), (0, self._pos)] if full else [(0, self.size)]
        for start, end in spans:
            self._file.seek(start)
            offset = start
            while offset < end:
                block = self._file.read(min(_CHUNK, end - offset))
                if not block:
                    raise OSError(errno.EIO, "shorter than expected")
                offset += len(block)
                yield block

    def remove(self) -> None:
        """Close and delete the sidecar if this ring created it; OSError if it cannot."""
        if self._file is None:
            return
        try:
            self._file.close()
        finally:
            self.path.unlink(missing_ok=True)


class CappedLogPump:
    """Copies a child's combined stdout/stderr into a file, keeping the head and the tail.

    ``written`` counts output bytes in the file (the marker excluded) and ``dropped`` the
    output bytes left out; while the child runs, bytes waiting in the tail ring count as
    neither. ``error`` is the first I/O problem met, or None. Read all three after
    :meth:`join` returned True.
    """

    def __init__(self, source: IO[bytes], path: Path, cap: int,
                 tap: Callable[[bytes], None] | None = None, *, created: bool = False) -> None:
        """``tap`` sees every chunk of output as it is read (a worker ships it off the host);
        an exception in it is recorded like a log error and does not stop the pump.
        ``created``: the caller made the log, which is then opened at the first output."""
        if cap < 0:
            raise ValueError(f"the log cap must not be negative, got {cap}")
        self._source = source
        self._tap = tap
        self._path = path
        self._head_cap = cap // 2
        self._ring = _TailRing(sidecar_path(path), cap - cap // 2)
        self._sink: io.FileIO | None = None
        self._lazy = created  # a silent command then costs no open (nor a lock handoff)
        self._total = 0
        self.written = 0
        self.dropped = 0
        self.error: str | None = None
        self._broken = False  # a bug met: the rest of the output is counted, not kept
        self._thread = threading.Thread(target=self._pump, name="ql-log-pump", daemon=True)

    def start(self) -> None:
        """Pump on a thread of its own until the output ends (see :meth:`join`)."""
        self._thread.start()

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # Pumped by the caller instead (execution/command.py, ``supervise``): ``open``, then
    # ``pump_once`` each time the source is readable, then ``close`` once the output ended.

    def open(self) -> None:
        """Ready for output: the log opens now, or with ``created`` at the first output."""
        if not self._lazy:
            self._open_log()

    def feed(self, chunk: bytes) -> None:
        """Keep one chunk of output (never raises: a bug drops the log, not the child)."""
        if self._broken:
            self._total += len(chunk)
            return
        try:
            if self._lazy:
                self._lazy = False
                self._open_log()
            self._feed_tap(chunk)
            self._take(memoryview(chunk))
        except Exception as exc:  # noqa: BLE001 -- a bug must not leave the child blocked
            self._break(exc)

    def close(self) -> None:
        """The output ended (or is abandoned): the tail goes into the log, the sidecar is
        removed, the source is closed, and ``written``/``dropped``/``error`` are final."""
        try:
            if not self._broken:
                self._append_tail()
        except Exception as exc:  # noqa: BLE001
            self._break(exc)
        finally:
            self._lose_sink()
            try:
                self._ring.remove()
            except OSError as exc:
                self._fail(f"cannot remove log tail {self._ring.path}: {_reason(exc)}")
            self.dropped = self._total - self.written
            with contextlib.suppress(OSError):
                self._source.close()

    def _break(self, exc: Exception) -> None:
        self._fail(f"cannot write log {self._path}: {exc!r}")
        self._lose_sink()
        self._broken = True

    def pump_once(self) -> bool:
        """Keep what one read of the source gives; False at the end of the output (or when
        it cannot be read, said in ``error``). Blocks until the read returns: ``supervise``
        calls it once ``poll`` says the output is readable."""
        chunk = self._read(self._reader())
        if not chunk:
            return False
        self.feed(chunk)
        return True

    def _pump(self) -> None:
        try:
            self.open()
            while self.pump_once():
                pass
        finally:
            self.close()

    def _feed_tap(self, chunk: bytes) -> None:
        if self._tap is None:
            return
        try:
            self._tap(chunk)
        except Exception as exc:  # noqa: BLE001 -- shipping is best effort, the file stays
            self._fail(f"cannot ship the output of log {self._path}: {exc!r}")
            self._tap = None

    def _reader(self) -> Callable[[int], bytes]:
        # read1 returns whatever one read of the pipe gives, instead of waiting to fill a chunk.
        return (
            self._source.read1 if isinstance(self._source, io.BufferedIOBase) else self._source.read
        )

    def _read(self, read: Callable[[int], bytes]) -> bytes:
        try:
            return read(_CHUNK)
        except (OSError, ValueError) as exc:
            self._fail(f"cannot read the output for log {self._path}: {exc}")
            return b""

    def _open_log(self) -> None:
        try:
            self._sink = open(self._path, "ab", buffering=0,  # noqa: SIM115 -- _lose_sink closes
                              opener=private_opener)
        except OSError as exc:
            self._fail(f"cannot write log {self._path}: {_reason(exc)}")
            self._ring.abandon()

    def _take(self, chunk: memoryview) -> None:
        self._total += len(chunk)
        room = self._head_cap - self.written
        if room > 0:
            self.written += self._write(chunk[:room])
            chunk = chunk[room:]
        if chunk and self._sink is not None:
            try:
                self._ring.push(chunk)
            except OSError as exc:
                self._fail(f"cannot write log tail {self._ring.path}: {_reason(exc)}")
        self.dropped = self._total - self.written - self._ring.size

    def _append_tail(self) -> None:
        if self._sink is None:
            return
        gap = self._total - self.written - self._ring.size
        if gap:
            self._write(memoryview(drop_marker(gap)))
        try:
            for block in self._ring.blocks():
                went = self._write(memoryview(block))
                self.written += went
                if went < len(block):  # the log failed; _write recorded why
                    break
        except OSError as exc:
            self._fail(f"cannot read log tail {self._ring.path}: {_reason(exc)}")

    def _write(self, data: memoryview) -> int:
        """Append ``data`` to the log; returns the bytes that went (fewer only on failure)."""
        if self._sink is None:
            return 0
        done = 0
        try:
            while done < len(data):
                done += _write_some(self._sink, data[done:])
        except OSError as exc:
            self._fail(f"cannot write log {self._path}: {_reason(exc)}")
            self._lose_sink()
        return done

    def _lose_sink(self) -> None:
        """Close the log; from here on all output is drained and dropped."""
        sink, self._sink = self._sink, None
        self._ring.abandon()
        if sink is not None:
            try:
                sink.close()
            except OSError as exc:
                self._fail(f"cannot write log {self._path}: {_reason(exc)}")

    def _fail(self, message: str) -> None:
        if self.error is None:
            self.error = message


def tail(path: Path, lines: int, max_bytes: int = 64 * 1024) -> list[str]:
    """The last ``lines`` lines of a log file (reading at most ``max_bytes`` from its end)."""
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return []
    text = data.decode("utf-8", errors="replace")
    return text.splitlines()[-lines:] if lines > 0 else []


def prune_log_dir(log_dir: Path, before_ms: int, limit: int = 500) -> int:
    """Delete the log files of Runs last written before ``before_ms`` (file modification time),
    with their Run directories once empty; at most ``limit`` files a pass. By the file's time
    only: a running command quiet for the whole retention loses its log file (having printed
    nothing yet, it gets a new one while its Run directory is there, else a log error; having
    printed, it writes on into the removed file, lost). An empty directory goes only when
    this pass emptied it or it is older than ``before_ms`` (a new Attempt's stays)."""
    removed = 0
    try:
        runs = list(log_dir.iterdir())
    except OSError:
        return 0
    for run_dir in runs:
        if not run_dir.is_dir():
            continue
        with contextlib.suppress(OSError):
            emptied = False
            for item in run_dir.iterdir():
                if removed >= limit:
                    return removed
                if item.is_file() and item.stat().st_mtime * 1000 < before_ms:
                    item.unlink()
                    removed += 1
                    emptied = True
            if emptied or run_dir.stat().st_mtime * 1000 < before_ms:
                run_dir.rmdir()  # only when empty: OSError otherwise, suppressed
    return removed
