"""The lock that keeps one `ql serve` per SQLite database file."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from qinglong.errors import AlreadyRunning, InvalidConfig
from qinglong.storage.sqlite.connection import check_single_name


class ServeLock:
    """One `ql serve` per database file: an exclusive flock on a file beside the database's
    real path (symbolic links resolved; a file with several hard links is refused by
    SqliteDatabase), holding the server's pid so a refusal can name it.

    The lock is not taken on the database file itself: closing any descriptor of that file
    would drop the POSIX locks SQLite holds on it in this process."""

    def __init__(self, database_path: Path) -> None:
        real = database_path.resolve()
        self.database_path = database_path
        self._path = real.with_name(real.name + ".serve.lock")
        self._fd: int | None = None

    def acquire(self) -> None:
        check_single_name(self.database_path.resolve())
        try:
            fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise InvalidConfig("database-url", f"cannot create the lock file {str(self._path)!r} "
                                                f"({exc.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise AlreadyRunning(
                f"another `ql serve`{who} is already serving {str(self.database_path)!r}"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


__all__ = ["ServeLock"]
