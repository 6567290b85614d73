"""A script task on a real executor (issue 22, item 1; docs/scripts.md): the executor runs
exactly the content the task pinned, fetched by its digest and written under the Run's own
directory (removed afterwards); content that is missing or no longer matches its digest
fails the Attempt with a code of its own and runs nothing."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from qinglong.domain.parameters import Parameter, ParamType
from qinglong.domain.task import CommandSpec, ScriptCommand
from qinglong.errors import NotFound, RecordCorrupt
from qinglong.execution.scripts import Fetch
from tests.execution.test_local_executor import log_text

pytestmark = pytest.mark.slow

SCRIPT = b"""import os, sys
print("args", sys.argv[1:])
print("file", os.path.basename(__file__))
print("dir", os.path.basename(os.path.dirname(__file__)))
print("root", os.path.basename(os.path.dirname(os.path.dirname(__file__))))
"""


def store(*contents: bytes) -> dict[str, bytes]:
    return {hashlib.sha256(c).hexdigest(): c for c in contents}


def fetcher(contents: dict[str, bytes]) -> Fetch:
    def fetch(digest: str) -> bytes:
        if digest not in contents:
            raise NotFound("script content", digest)
        content = contents[digest]
        if hashlib.sha256(content).hexdigest() != digest:
            raise RecordCorrupt("the stored content has another SHA-256")
        return content
    return fetch


def script_spec(content: bytes, path: str = "jd/sign.py", *args: str,
                interpreter: str = "python3", **more: object) -> CommandSpec:
    return CommandSpec(command=ScriptCommand(path=path, digest=hashlib.sha256(content).hexdigest(),
                                             interpreter=interpreter, args=args),
                       timeout_ms=30_000, **more)  # type: ignore[arg-type]


def test_the_pinned_content_runs_with_its_interpreter_and_arguments(run, tmp_path: Path) -> None:
    spec = script_spec(SCRIPT, "jd/sign.py", "--day", "{{day}}",
                       parameters=(Parameter(name="day", type=ParamType.STRING,
                                             default="mon"),))
    detail = run(spec, scripts=fetcher(store(SCRIPT)))
    assert detail.run.status == "succeeded", detail.attempts
    lines = log_text(detail).splitlines()
    assert lines == ["args ['--day', 'mon']", "file sign.py", "dir jd", "root script-1"]
    # the script's directory is gone once the Attempt ended; the log stays
    run_dir = Path(detail.attempts[0].log_path or "").parent
    assert [p.name for p in run_dir.iterdir()] == ["attempt-1.log"]


def test_a_shell_script_runs_with_the_interpreter_the_task_names(run) -> None:
    content = b"echo \"shell says $1\"\n"
    detail = run(script_spec(content, "tools/say", "hi", interpreter="sh"),
                 scripts=fetcher(store(content)))
    assert detail.run.status == "succeeded", detail.attempts
    assert log_text(detail).strip() == "shell says hi"


def test_content_that_no_longer_matches_its_digest_never_runs(run, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    honest = f"open({str(marker)!r}, 'w').write('x')\n".encode()
    tampered = {hashlib.sha256(honest).hexdigest(): honest + b"print('extra')\n"}
    detail = run(script_spec(honest), scripts=fetcher(tampered))
    [attempt] = detail.attempts
    assert (detail.run.status, attempt.error_code) == ("failed", "SCRIPT_DIGEST_MISMATCH")
    assert not marker.exists()
    assert "SHA-256" in log_text(detail)


def test_missing_content_fails_with_its_own_code(run) -> None:
    detail = run(script_spec(SCRIPT), scripts=fetcher({}))
    [attempt] = detail.attempts
    assert (detail.run.status, attempt.error_code) == ("failed", "SCRIPT_MISSING")
    assert "no content with this digest" in (attempt.error_summary or "")


def test_an_executor_without_a_script_store_says_so(run) -> None:
    detail = run(script_spec(SCRIPT), scripts=None)
    assert detail.attempts[0].error_code == "SCRIPT_UNAVAILABLE"


def test_a_run_as_user_reads_its_script(run) -> None:
    """Where the executor is root and runs commands as another user, the script is handed to
    that user (CI runs as root; elsewhere this is a failure, never a silent skip)."""
    from qinglong.execution.identity import Identity, RunAs

    if os.geteuid() != 0:
        pytest.fail("running a command as another user needs root: run as root (as CI does)")
    identity = Identity(run_as=RunAs.lookup("nobody"))
    content = b"import os; print('uid', os.getuid())\n"
    detail = run(script_spec(content, "as/nobody.py"), identity,
                 scripts=fetcher(store(content)))
    assert detail.run.status == "succeeded", detail.attempts
    assert log_text(detail).strip() == f"uid {identity.run_as.uid}"  # type: ignore[union-attr]
