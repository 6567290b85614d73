"""A project's dependencies where its commands run (docs/dependencies.md).

The executor never installs anything in its own process: an install Run, and a script Run
of a project that has a dependency set, run the installer (deps_install.py) as their
command, supervised like any command (its timeout, a cancel, its log). The installer makes
the set's environment in this executor's cache, keyed by the set's digest, unless it is
there already, and then (a script Run) executes the script in it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from qinglong.domain.deps import DepsRevision
from qinglong.domain.lifecycle import Outcome
from qinglong.domain.runs import AttemptStatus
from qinglong.errors import RecordCorrupt

# A project's latest revisions, newest first (none: it has no set); the first is its current
# set, the others what a script Run may fall back to when the current one cannot be built.
Lookup = Callable[[str], Sequence[DepsRevision]]
Launch = tuple[list[str], dict[str, str]]  # an argv and the environment only it gets
INSTALLER = "qinglong.execution.deps_install"


def _failed(code: str, summary: str) -> Outcome:
    return Outcome(status=AttemptStatus.FAILED, exit_code=None, error_code=code,
                   error_summary=summary)


def launch(lookup: Lookup | None, cache: Path | None, project_id: str,
           then: list[str] | None) -> Launch | Outcome | None:
    """The installer's argv for the project's current set: installing it (``then`` None: an
    install Run), or making sure it is installed and then executing ``then`` in it (a script
    Run; None when the project has no set, so the script runs as it is). A storage fault
    reading the set propagates (the caller retries it within the lease)."""
    if lookup is None:
        if then is None:
            return _failed("DEPS_UNAVAILABLE", "this executor installs no dependencies (it "
                                               "has no dependency store)")
        return None
    try:
        revisions = lookup(project_id)
    except RecordCorrupt as exc:
        return _failed("DEPS_UNREADABLE", f"the project's dependency set: {exc}")
    current = revisions[0] if revisions else None
    if then is not None and (current is None or current.deps.empty):
        return None
    if cache is None:
        return _failed("DEPS_UNAVAILABLE", "this executor has no dependency cache: start it "
                                           "with --deps-dir")
    argv = [sys.executable, "-m", INSTALLER, "--cache", str(cache)]
    if current is not None:
        argv += ["--digest", current.digest, "--revision", str(current.revision)]
        for spec in current.deps.python:
            argv += ["--python", spec]
        for spec in current.deps.node:
            argv += ["--node", spec]
    if then is not None and current is not None:
        seen = {current.digest}
        for earlier in revisions[1:]:
            if earlier.digest not in seen and not earlier.deps.empty:
                seen.add(earlier.digest)
                languages = "+".join(name for name, specs in (
                    ("python", earlier.deps.python), ("node", earlier.deps.node)) if specs)
                argv += ["--fallback", f"{earlier.digest}:{earlier.revision}:{languages}"]
        argv += ["--", *then]
    return argv, {}
