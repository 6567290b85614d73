"""Where a task's working directory can be checked at publish time: where the database's Runs
execute on this host (a local executor: the SQLite profiles, `ql serve`, `ql web` on a SQLite
file), a directory that does not exist here is refused; where workers run them on their own
hosts (PostgreSQL), the publisher cannot see it."""

from __future__ import annotations

from pathlib import Path

from qinglong.errors import InvalidInput


def check_directory_here(directory: str | None, commands_run_here: bool) -> None:
    """Refuse ``directory`` when commands run on this host and it is not a directory here. A
    relative path is left to the task's own rule (it must be absolute)."""
    if directory is None or not commands_run_here or not directory.startswith("/"):
        return
    if not Path(directory).is_dir():
        raise InvalidInput("working-directory", f"directory {directory!r} does not exist on this "
                                                "host (commands of the SQLite profiles run here)")
