"""Where a task's working directory can be checked at publish time: on the SQLite profiles
(`ql serve`, `ql run`, `ql web` on a SQLite file) commands run on the host that publishes, so
a directory that does not exist here is refused; on PostgreSQL the workers run them on their
own hosts, which the publisher cannot see."""

from __future__ import annotations

from pathlib import Path

from qinglong.errors import InvalidInput


def check_directory_here(directory: str | None, kind: str) -> None:
    """Refuse ``directory`` when the profile ``kind`` ("sqlite" or "postgresql") runs commands
    on this host and it is not a directory here. A relative path is left to the task's own
    rule (it must be absolute)."""
    if directory is None or kind != "sqlite" or not directory.startswith("/"):
        return
    if not Path(directory).is_dir():
        raise InvalidInput("working-directory", f"directory {directory!r} does not exist on this "
                                                "host (commands of the SQLite profiles run here)")
