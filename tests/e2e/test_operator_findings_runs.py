"""Issue 18, item 7 (the Run commands), as an operator meets them: real `ql` processes on
SQLite.

- `ql run logs --follow` stopped by Ctrl-C (SIGINT) exits 130, as the README's exit codes say;
- `ql run show` (and `logs`, `cancel`) with a Run id prefix shorter than 8 characters says
  the prefix is too short (exit 2), and an unknown one is not found (an ambiguous prefix:
  tests/contract/test_run_outcomes_stats.py);
- `ql trigger backfill` reaches back before the trigger's first publish (a migrated
  crontab's history), and `ql audit` finds nothing wrong with what it admitted.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.ql import Ql, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def ql(tmp_path: Path) -> Ql:
    q = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path)
    q.run("db", "migrate")
    q.run("project", "create", "demo")
    return q


def read_until(process: subprocess.Popen[bytes], wanted: bytes, timeout: float) -> bytes:
    """What ``process`` printed on stdout until ``wanted`` appeared (fails the test after
    ``timeout`` seconds without it, or when the process ends first)."""
    assert process.stdout is not None
    seen = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while wanted not in seen:
            left = deadline - time.monotonic()
            assert left > 0, f"timed out waiting for {wanted!r}; printed {seen!r}"
            if selector.select(left):
                chunk = os.read(process.stdout.fileno(), 4096)
                assert chunk, f"the process ended before printing {wanted!r}: {seen!r}"
                seen += chunk
    return seen


# Puts SIGINT back to its default, then becomes the command (the disposition survives exec).
_DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                   "os.execv(sys.argv[1], sys.argv[1:])")


def at_a_terminal(command: list[str]) -> list[str]:
    """``command`` started as a shell at a terminal starts it: SIGINT at its default. A suite
    started in the background by a script (`make test &`) runs with SIGINT ignored, as POSIX
    has background commands; a `ql` that inherits that rightly ignores Ctrl-C, and this test
    would wait in vain (seen once in a clean-clone run)."""
    return [sys.executable, "-c", _DEFAULT_SIGINT, *command]


def test_run_logs_follow_exits_130_on_sigint(ql: Ql, tmp_path: Path) -> None:
    ql.run("task", "publish", "--project", "demo", "--task", "slow", "--shell",
           "echo ready; sleep 120")
    run_id = ql.json("task", "run", "--project", "demo", "--task", "slow")["id"]
    server = ql.start("serve", "--interval", "250ms", stdout=tmp_path / "serve.out")
    follow: subprocess.Popen[bytes] | None = None
    try:
        wait_for(lambda: ql.json("run", "show", run_id)["run"]["status"] == "running", 30,
                 "the Run to run")
        follow = subprocess.Popen(at_a_terminal(ql.command("run", "logs", run_id, "--follow")),
                                  cwd=ql.cwd, env=ql.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        assert read_until(follow, b"ready\n", 30) == b"ready\n"
        assert follow.poll() is None  # still following: the Run is running
        follow.send_signal(signal.SIGINT)
        assert follow.wait(timeout=30) == 130
        assert follow.stderr is not None and b"Traceback" not in follow.stderr.read()
    finally:
        if follow is not None:
            if follow.poll() is None:
                follow.kill()
                follow.wait()
            for pipe in (follow.stdout, follow.stderr):
                if pipe is not None:
                    pipe.close()
        ql.run("run", "cancel", run_id, check=False)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=60) == 0, (tmp_path / "serve.out").read_text()


def test_run_show_says_a_prefix_is_too_short_or_ambiguous(ql: Ql) -> None:
    ql.run("task", "publish", "--project", "demo", "--task", "job", "--shell", "true")
    run_id = ql.json("task", "run", "--project", "demo", "--task", "job")["id"]
    for short in (run_id[:2], run_id[:7]):
        shown = ql.run("run", "show", short, check=False)
        assert shown.returncode == 2, shown.stderr
        assert shown.stderr == (f"ql: run: '{short}': prefix too short (at least 8 "
                                "characters)\n")
        as_json = ql.run("run", "show", short, "--json", check=False)
        problem = json.loads(as_json.stderr)["error"]
        assert (as_json.returncode, problem["code"], problem["field"]) == (
            2, "QL_INVALID_INPUT", "run")
    assert ql.json("run", "show", run_id[:8])["run"]["id"] == run_id  # 8 is enough
    unknown = "00000000" if run_id.startswith("ffffffff") else "ffffffff"
    missing = ql.run("run", "show", unknown, check=False)
    assert (missing.returncode, missing.stderr) == (2, f"ql: run '{unknown}' not found\n")
    for command in (("run", "logs"), ("run", "cancel")):
        refused = ql.run(*command, run_id[:3], check=False)
        assert refused.returncode == 2 and "prefix too short" in refused.stderr, refused.stderr


def test_a_migrated_crontabs_history_before_its_first_publish_is_backfilled(
        ql: Ql, tmp_path: Path) -> None:
    """`ql import crontab` publishes the job today; the day before it (when cron ran it) can
    be backfilled, and `ql audit` over a window reaching back to it finds nothing wrong."""
    crontab = tmp_path / "crontab"
    crontab.write_text("0 * * * * /bin/echo hourly\n")
    ql.run("import", "crontab", str(crontab), "--project", "demo", "--timezone", "UTC")
    [trigger] = ql.json("trigger", "list", "--project", "demo")
    published = int(trigger["published_at_ms"])
    done = ql.json("trigger", "backfill", "--project", "demo", "--trigger", trigger["trigger"],
                   "--from", str(published - 86_400_000), "--to", str(published - 1),
                   "--rate", "1000")
    hour = 3_600_000
    wanted = list(range((published - 86_400_000) // hour * hour + hour, published, hour))
    assert (done["state"], done["admitted"], [r["scheduled_for_ms"] for r in done["runs"]]) == (
        "done", 24, wanted)
    report = ql.json("audit", "--from", str(published - 2 * 86_400_000), "--to", str(published))
    [judged] = report["triggers"]
    assert report["ok"] and (judged["duplicates"], judged["spurious"]) == (0, []), report
    assert report["execution"]["runs"] == 24
