"""Shipping a command's output off the worker while it runs, into the database.

The output is cut into chunks (at most 64 KiB each) and sent every second, or sooner when a
chunk is full. The first half of the cap is kept whole (``head`` chunks); everything after
it is ``tail``, and the store keeps only the latest half of the cap of it, so a long job's
log keeps its beginning and its end (where the error usually is). Every send is fenced by the
Attempt's lease and idempotent by chunk number, so a resend after a lost reply stores
nothing twice and a worker that lost its lease stores nothing at all.

Memory stays bounded: when the database is slow or away, pending tail bytes older than the
tail budget are dropped here, since the store would drop them anyway.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

from qinglong.clock import Clock
from qinglong.diagnostics import DiagnosticSink, diagnostic_from, emit
from qinglong.domain.lifecycle import LeaseFence
from qinglong.errors import QinglongError
from qinglong.storage.runs.logs import LogStore
from qinglong.storage.runs.params import LogChunk

CHUNK_BYTES = 64 * 1024
FLUSH_INTERVAL_S = 1.0


@dataclass(slots=True, eq=False)
class _Pending:
    part: str
    offset: int
    data: bytearray
    sealed: bool = False  # being sent: nothing more is added to it


class LogShipper:
    def __init__(self, store: LogStore, fence: LeaseFence, cap: int, clock: Clock, *,
                 flush_interval_s: float = FLUSH_INTERVAL_S,
                 diagnostics: DiagnosticSink | None = None) -> None:
        self._store = store
        self._fence = fence
        self._head_budget = cap // 2
        self._tail_budget = cap - cap // 2
        self._clock = clock
        self._interval = flush_interval_s
        self._diagnostics = diagnostics
        self._pending: deque[_Pending] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._done = threading.Event()
        self._total = 0  # bytes fed so far
        self._seq = 0
        self._fenced_out = False
        self._thread = threading.Thread(target=self._loop, name="ql-log-ship", daemon=True)
        self.shipped = 0

    def start(self) -> None:
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
        self._thread.join(timeout_s)

    def _loop(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            finishing = self._done.is_set()
            self._flush()
            if finishing:
                return

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
            emit(self._diagnostics, diagnostic_from("worker", exc))
            return  # kept pending; the next flush tries again
        sent = {id(p) for p in batch}
        with self._lock:  # what was sent leaves the queue; newer output stays
            self._pending = deque(p for p in self._pending if id(p) not in sent)
        if not stored:
            self._fenced_out = True
            return
        self._seq += len(batch)
        self.shipped += sum(len(c.data) for c in chunks)


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
