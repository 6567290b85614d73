"""Fresh identifiers: Run, Attempt and event ids and lease tokens are random UUIDs.

They are version 4 UUIDs (122 random bits from ``os.urandom``, the version and the RFC 4122
variant set as ``uuid.uuid4()`` sets them), formatted without building ``uuid.UUID`` objects
and drawn from a pool read from ``os.urandom`` 4 KiB at a time: a worker makes about seven per
Run, and a system call each (which also hands the interpreter lock to another thread) cost
more than the formatting. The pool is emptied in a forked child, so a parent and its child
never hand out the same bytes.

The Runs and Attempts a scheduler admits take time-ordered ids instead (version 7, RFC 9562:
the claim's instant in milliseconds, then 74 random bits), so that the indexes keyed by
them (a Run's and an Attempt's primary keys, an Attempt's and an event's Run) receive each
new entry next to the last one instead of at a random page: in a burst of 100,000 that cut
the server's CPU by 11-14 % (docs/performance.md, run X). The instant is the caller's
(the store's clock reading of the claim), never read here.
"""

from __future__ import annotations

import os
import threading

_POOL_BYTES = 4096
# the variant digit (the 17th): its top two bits set to 10
_VARIANT = {f"{n:x}": f"{n & 0x3 | 0x8:x}" for n in range(16)}


class _Pool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hex = ""
        self._at = 0

    def take(self, count: int) -> str:
        """``count`` x 16 random bytes, as hex."""
        want = 32 * count
        with self._lock:
            if self._at + want > len(self._hex):
                self._hex = os.urandom(max(_POOL_BYTES, want // 2)).hex()
                self._at = 0
            start, self._at = self._at, self._at + want
            return self._hex[start:self._at]

    def reset(self) -> None:
        self._lock = threading.Lock()
        self._hex, self._at = "", 0


_POOL = _Pool()
os.register_at_fork(after_in_child=_POOL.reset)


def new_uuids(count: int) -> list[str]:
    """``count`` random (version 4) UUIDs in their lowercase text form."""
    h = _POOL.take(count)
    return [f"{h[i:i + 8]}-{h[i + 8:i + 12]}-4{h[i + 13:i + 16]}-{_VARIANT[h[i + 16]]}"
            f"{h[i + 17:i + 20]}-{h[i + 20:i + 32]}" for i in range(0, 32 * count, 32)]


def new_uuid() -> str:
    """A random (version 4) UUID in its lowercase text form."""
    return new_uuids(1)[0]


MAX_INSTANT_MS = (1 << 48) - 1  # the widest instant a version 7 UUID holds (year 10889)


def time_ordered_uuids(count: int, at_ms: int) -> list[str]:
    """``count`` version 7 UUIDs for the instant ``at_ms`` (milliseconds since the epoch,
    0..MAX_INSTANT_MS): the instant in their first 48 bits, so ids made later sort after
    these, and 74 random bits, so ids made in the same millisecond are still unique."""
    if not 0 <= at_ms <= MAX_INSTANT_MS:
        raise ValueError(f"a version 7 UUID cannot hold the instant {at_ms} ms")
    t = f"{at_ms:012x}"
    h = _POOL.take(count)
    return [f"{t[:8]}-{t[8:]}-7{h[i + 13:i + 16]}-{_VARIANT[h[i + 16]]}"
            f"{h[i + 17:i + 20]}-{h[i + 20:i + 32]}" for i in range(0, 32 * count, 32)]
