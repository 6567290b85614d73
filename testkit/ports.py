"""Loopback ports for the test harness's servers, reserved across processes.

Several pytest workers (and several test runs) start PostgreSQL servers, replicas and workers
on one machine at once. A port that is only *probed* free can be taken by another process
before the server binds it (PostgreSQL binds seconds later, after initdb), so a port is
*reserved* instead:

- it is drawn at random from below the kernel's ephemeral range (by default 32768-60999), so
  neither an outgoing connection nor a ``bind(port 0)`` anywhere on the machine is handed it;
- it is reserved by an exclusive ``flock`` on ``<tmp>/qinglong-ports/<port>.lock``, held
  for as long as the `PortReservation` lives (the kernel drops it when the holder exits, even
  by SIGKILL), so no two harness processes hold the same port;
- it is free at the time of the reservation (a bind of 0.0.0.0 succeeds), so a port some
  other program listens on is never handed out.

The server may still find the port taken by a program outside the harness that binds a fixed
port in that range; `testkit.postgres.EmbeddedPostgres.start` then reserves another one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path

LOCK_DIR = Path(tempfile.gettempdir()) / "qinglong-ports"
PREFERRED = range(20_000, 32_768)
POSTGRES_DEFAULT = 5432
_ATTEMPTS = 500
_rng = random.SystemRandom()
_held_for_the_process: list[PortReservation] = []


def _ephemeral_range() -> range:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return range(int(low), int(high) + 1)
    except (OSError, ValueError):
        return range(32_768, 61_000)


def candidates() -> list[int]:
    """The ports the harness draws from: PREFERRED less the ephemeral range (or, if a
    machine's ephemeral range covers most of it, every unprivileged port outside it)."""
    ephemeral = _ephemeral_range()
    found = [p for p in PREFERRED if p not in ephemeral and p != POSTGRES_DEFAULT]
    if len(found) < 1_000:
        found = [p for p in range(10_000, 65_536) if p not in ephemeral and p != POSTGRES_DEFAULT]
    return found


class PortReservation:
    """One reserved port; `release` (or the object's collection) gives it back."""

    def __init__(self, port: int, fd: int) -> None:
        self.port = port
        self._fd: int | None = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __del__(self) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"PortReservation({self.port}, held={self.held})"


def _lock(port: int) -> int | None:
    LOCK_DIR.mkdir(exist_ok=True)
    with contextlib.suppress(PermissionError):  # every user of the machine shares the pool
        if LOCK_DIR.stat().st_mode & 0o1777 != 0o1777:
            LOCK_DIR.chmod(0o1777)
    # read-only is enough for flock, so a lock file another user created serves us too
    fd = os.open(LOCK_DIR / f"{port}.lock", os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _bindable(port: int) -> bool:
    """Nothing is bound to ``port`` on any IPv4 address (nor lingers there in TIME_WAIT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("0.0.0.0", port))  # a probe, closed at once
        except OSError:
            return False
    return True


def reserve_port() -> PortReservation:
    """A free loopback port, reserved until the returned object is released or collected."""
    pool = candidates()
    for _ in range(_ATTEMPTS):
        port = _rng.choice(pool)
        fd = _lock(port)
        if fd is None:
            continue  # another harness process holds it
        if _bindable(port):
            return PortReservation(port, fd)
        os.close(fd)
    raise RuntimeError(f"no free port after {_ATTEMPTS} tries in {pool[0]}-{pool[-1]} "
                       f"(reservations in {LOCK_DIR})")


def free_port() -> int:
    """A reserved free port, held until this process exits (for callers that keep only the
    number)."""
    reservation = reserve_port()
    _held_for_the_process.append(reservation)
    return reservation.port
