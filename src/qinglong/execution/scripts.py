"""A script task's content, written where its command runs (docs/scripts.md).

The plan pins the SHA-256 of the script's content; the executor fetches exactly those bytes
by it (verified against the digest as they are read), writes them under the Run's own
directory at the script's path in its project, and runs the interpreter on that file. The
file is removed when the Attempt ends. A content that cannot be found or does not match its
digest fails the Attempt with a code of its own: nothing else is ever run in its place.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from qinglong.domain.lifecycle import Outcome
from qinglong.domain.runs import AttemptStatus
from qinglong.domain.task import ScriptCommand
from qinglong.errors import NotFound, RecordCorrupt
from qinglong.execution.identity import Identity
from qinglong.execution.logs import private_dir, private_opener

Fetch = Callable[[str], bytes]  # the content whose SHA-256 is the argument, verified
SCRIPT_DIR = "script-{attempt}"


def _failed(code: str, summary: str) -> Outcome:
    return Outcome(status=AttemptStatus.FAILED, exit_code=None, error_code=code,
                   error_summary=summary)


def script_dir(run_dir: Path, attempt: int, identity: Identity) -> Path:
    """The directory an Attempt's script is written to: in the Run's own directory
    ``run_dir`` (beside its kept log); for a run-as user, who cannot enter the executor's
    private directories, a new private temporary directory that is handed to that user."""
    if identity.run_as is None:
        return run_dir / SCRIPT_DIR.format(attempt=attempt)
    return Path(tempfile.mkdtemp(prefix=f"ql-{run_dir.name}-"))


def materialise(command: ScriptCommand, fetch: Fetch | None, directory: Path,
                identity: Identity) -> Path | Outcome:
    """Write the pinned content to ``directory/<path>`` (readable by the run-as user); the
    file's path, or the failure that keeps the command from starting. A storage fault while
    fetching propagates (the caller retries it within the lease)."""
    what = f"script {command.path!r} (sha256 {command.digest[:12]})"
    if fetch is None:
        return _failed("SCRIPT_UNAVAILABLE", f"{what}: this executor has no script store")
    try:
        content = fetch(command.digest)
    except NotFound:
        return _failed("SCRIPT_MISSING", f"{what}: no content with this digest is stored")
    except RecordCorrupt as exc:
        return _failed("SCRIPT_DIGEST_MISMATCH", f"{what}: {exc}")
    target = directory.joinpath(*command.path.split("/"))
    try:
        private_dir(target.parent)
        with open(target, "wb", opener=private_opener) as handle:
            handle.write(content)
        _hand_over(directory, target, identity)
    except OSError as exc:
        return _failed("SCRIPT_UNWRITABLE", f"{what}: cannot write {str(target)!r}: "
                                            f"{exc.strerror or exc}")
    return target


def _hand_over(directory: Path, target: Path, identity: Identity) -> None:
    """Give the script's directories and file to the run-as user, who must read them."""
    run_as = identity.run_as
    if run_as is None:
        return
    path = target
    while True:
        os.chown(path, run_as.uid, run_as.gid)
        if path == directory:
            return
        path = path.parent


def clean(directory: Path) -> None:
    """Remove an Attempt's script directory (what cannot be removed is left)."""
    shutil.rmtree(directory, ignore_errors=True)
