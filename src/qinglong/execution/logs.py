"""Per-attempt log files with a size cap: output beyond the cap is drained and dropped."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import IO

MIN_LOG_BYTES = 1024
MAX_LOG_BYTES = 1024 * 1024 * 1024
DEFAULT_LOG_BYTES = 1024 * 1024
_CHUNK = 64 * 1024


class CappedLogPump:
    """Copies a child's combined stdout/stderr into a file, up to ``cap`` bytes."""

    def __init__(self, source: IO[bytes], path: Path, cap: int) -> None:
        self._source = source
        self._path = path
        self._cap = cap
        self.written = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._pump, name="ql-log-pump", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _pump(self) -> None:
        with self._source, self._path.open("ab") as sink:
            while True:
                chunk = self._source.read1(_CHUNK)  # type: ignore[attr-defined]
                if not chunk:
                    break
                room = self._cap - self.written
                if room > 0:
                    sink.write(chunk[:room])
                    sink.flush()
                    self.written += min(room, len(chunk))
                self.dropped += max(0, len(chunk) - max(room, 0))
            if self.dropped:
                sink.write(f"\n[qinglong: {self.dropped} more bytes of output dropped]\n".encode())


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
