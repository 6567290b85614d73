"""Shipping a command's output off the worker while it runs, into the database.

The output is cut into chunks (at most 64 KiB each) and sent every second, or sooner when a
chunk is full. The first half of the cap is kept whole (``head`` chunks); everything after
it is ``tail``, and the store keeps only the latest half of the cap of it, so a long job's
log keeps its beginning and its end (where the error usually is). Every send is fenced by the
Attempt's lease and idempotent by chunk number, so a resend after a lost reply stores
nothing twice and a worker that lost its lease stores nothing at all.

Memory stays bounded: when the database is slow or away, pending tail bytes older than the
tail budget are dropped here, since the store would drop them anyway.

A store that refuses output is never silent: the first failure (and each different one) is a
diagnostic, ``on_failure`` hears every failed send (a worker stops being ready), the last
sends are tried FINAL_TRIES times, and what still could not be stored is ``lost``: the
executor records it on the Attempt, and `ql run logs` says so.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from qinglong.clock import Clock
from qinglong.diagnostics import Diagnostic, DiagnosticSink, diagnostic_from, emit
from qinglong.domain.lifecycle import LeaseFence, Outcome
from qinglong.errors import QinglongError
from qinglong.storage.runs.logs import LogStore
from qinglong.storage.runs.params import LogChunk

CHUNK_BYTES = 64 * 1024
# after the log store refused output, an executor is not healthy and takes no new work for
# this long (a worker that cannot store what its commands print stops taking Runs until it
# can again; each refusal starts the hold afresh)
LOG_REFUSAL_HOLD_S = 10.0
FLUSH_INTERVAL_S = 1.0
FINAL_TRIES = 3  # sends of what is left when the command has ended, FLUSH_INTERVAL_S apart


@dataclass(slots=True, eq=False)
class _Pending:
    part: str
    offset: int
    data: bytearray
    sealed: bool = False  # being sent: nothing more is added to it


@dataclass(frozen=True, slots=True)
class LostOutput:
    """Output the store did not take: how many bytes, and the last refusal."""

    bytes: int
    reason: str


class LogShipper:
    def __init__(self, store: LogStore, fence: LeaseFence, cap: int, clock: Clock, *,
                 flush_interval_s: float = FLUSH_INTERVAL_S,
                 diagnostics: DiagnosticSink | None = None,
                 on_failure: Callable[[QinglongError], None] | None = None) -> None:
        self._store = store
        self._fence = fence
        self._head_budget = cap // 2
        self._tail_budget = cap - cap // 2
        self._clock = clock
        self._interval = flush_interval_s
        self._diagnostics = diagnostics
        self._on_failure = on_failure
        self._failure: QinglongError | None = None  # the last send's refusal (None: it worked)
        self._said: str | None = None  # the refusal last reported as a diagnostic
        self._late = False  # close gave up waiting for the last sends
        self._pending: deque[_Pending] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._done = threading.Event()
        self._total = 0  # bytes fed so far
        self._seq = 0
        self._fenced_out = False
        self._thread = threading.Thread(target=self._loop, name="ql-log-ship", daemon=True)
        self._started = False  # the sending thread starts with the first output
        self._closing = False
        self.shipped = 0

    def start(self) -> None:
        """Ready to take output. The thread that sends it starts with the first piece, so a
        command that writes nothing costs no thread."""

    def _start_sending(self) -> None:
        """(under the lock) Start the sending thread once."""
        if not self._started and not self._closing:
            self._started = True
            self._thread.start()

    def feed(self, data: bytes) -> None:
        """Take a piece of output (from the pump's thread; never blocks on the database)."""
        with self._lock:
            view = memoryview(data)
            while view:
                head_room = self._head_budget - self._total
                take = view[:head_room] if head_room > 0 else view
                part = "head" if head_room > 0 else "tail"
                self._append(part, bytes(take))
                self._total += len(take)
                view = view[len(take):]
            self._bound_pending()
            full = sum(len(p.data) for p in self._pending) >= CHUNK_BYTES
            if self._pending:
                self._start_sending()
        if full:
            self._wake.set()

    def _append(self, part: str, data: bytes) -> None:
        last = self._pending[-1] if self._pending else None
        if (last is not None and not last.sealed and last.part == part
                and len(last.data) + len(data) <= CHUNK_BYTES):
            last.data.extend(data)
            return
        for start in range(0, len(data), CHUNK_BYTES):
            self._pending.append(_Pending(part, self._total + start,
                                          bytearray(data[start:start + CHUNK_BYTES])))

    def _bound_pending(self) -> None:
        """Drop pending tail chunks that lie wholly before the kept tail."""
        keep_from = self._total - self._tail_budget
        while (self._pending and self._pending[0].part == "tail"
               and self._pending[0].offset + len(self._pending[0].data) <= keep_from):
            self._pending.popleft()

    def close(self, timeout_s: float = 10.0) -> None:
        """Ship what is left (the executor calls this before it records the outcome)."""
        self._done.set()
        self._wake.set()
        with self._lock:
            self._closing = not self._started  # nothing was fed: nothing to send
        if self._closing:
            return
        self._thread.join(timeout_s)
        self._late = self._thread.is_alive()

    def _loop(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            finishing = self._done.is_set()
            self._flush()
            if finishing:
                break
        for _ in range(FINAL_TRIES - 1):  # what is left after a refusal: try again, then give up
            if self._failure is None or not self._pending:
                return
            self._wake.clear()
            self._wake.wait(self._interval)
            self._flush()

    @property
    def lost(self) -> LostOutput | None:
        """After ``close``: the output the store refused for good (None: all of it stored, or
        the lease was lost, when the Attempt is not this worker's to describe any more)."""
        with self._lock:
            failure = self._failure
            if self._fenced_out or (failure is None and not self._late) or not self._pending:
                return None
            unsent = sum(len(p.data) for p in self._pending)
        reason = (f"{failure.code}: {failure.message}" if failure is not None
                  else "the log store did not answer before the attempt ended")
        return LostOutput(bytes=unsent, reason=reason)

    def _flush(self) -> None:
        if self._fenced_out:
            return
        with self._lock:
            batch = list(self._pending)
            for pending in batch:
                pending.sealed = True
            chunks = tuple(LogChunk(seq=self._seq + i, part=p.part, byte_offset=p.offset,
                                    data=bytes(p.data)) for i, p in enumerate(batch))
            keep_from = max(self._head_budget, self._total - self._tail_budget)
        if not batch:
            return
        try:
            stored = self._store.log_append(self._fence, chunks, keep_from)
        except QinglongError as exc:
            self._failure = exc
            if exc.message != self._said:  # said once, not once a second
                self._said = exc.message
                emit(self._diagnostics, diagnostic_from("worker", exc))
            if self._on_failure is not None:
                self._on_failure(exc)
            return  # kept pending; the next flush tries again
        self._failure = None
        sent = {id(p) for p in batch}
        with self._lock:  # what was sent leaves the queue; newer output stays
            self._pending = deque(p for p in self._pending if id(p) not in sent)
        if not stored:
            self._fenced_out = True
            return
        self._seq += len(batch)
        self.shipped += sum(len(c.data) for c in chunks)


class LogRefusals:
    """When a log store last refused output, and why."""

    def __init__(self, clock: Clock, hold_s: float = LOG_REFUSAL_HOLD_S) -> None:
        self._clock = clock
        self._hold_s = hold_s
        self._at: float | None = None
        self.reason: str | None = None

    def refused(self, exc: QinglongError) -> None:
        self.reason = f"{exc.code}: {exc.message}"
        self._at = self._clock.monotonic()

    @property
    def active(self) -> bool:
        """A refusal less than the hold ago."""
        at = self._at
        return at is not None and self._clock.monotonic() - at < self._hold_s


def noting_lost_output(outcome: Outcome | None, shipper: LogShipper, run_id: str,
                       diagnostics: DiagnosticSink | None) -> Outcome | None:
    """The outcome to record, saying what output the store refused (after ``close``): a log
    that could not be stored is a diagnostic and a fact on the Attempt, never silent."""
    lost = shipper.lost
    if outcome is None or lost is None:
        return outcome
    emit(diagnostics, Diagnostic(source="executor", code="QL_LOG_NOT_STORED",
                                 message=f"run {run_id}: {lost.bytes} bytes of output could "
                                         f"not be stored ({lost.reason})"))
    return dataclasses.replace(outcome, output_lost=lost.reason, output_lost_bytes=lost.bytes)


def assemble(chunks: list[LogChunk]) -> bytes:
    """An Attempt's output from its chunks: the head, a marker where output was dropped,
    then the tail."""
    out = bytearray()
    end = 0
    for chunk in sorted(chunks, key=lambda c: c.seq):
        if chunk.byte_offset > end:
            out += f"\n[qinglong: {chunk.byte_offset - end} bytes of output dropped here]\n".encode()
        elif chunk.byte_offset < end:  # overlaps what is already there (never in practice)
            chunk = LogChunk(seq=chunk.seq, part=chunk.part, byte_offset=end,
                             data=chunk.data[end - chunk.byte_offset:])
        out += chunk.data
        end = chunk.byte_offset + len(chunk.data)
    return bytes(out)
