"""Edge and standalone never load PostgreSQL code: checked in a fresh interpreter that runs
the whole SQLite path (migrate, publish, serve with admissions and executions, reads)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# The PostgreSQL driver and its stores' SQL (storage/postgres/*), and the cluster profiles
# (a `ql control` replica, a `ql worker`, and what only they use: their settings, instance
# registration, the availability fence, LISTEN wake-ups and the run notifier).
FORBIDDEN = ("psycopg", "psycopg_pool", "psycopg_binary", "qinglong.storage.postgres",
             "qinglong.profiles.cluster", "qinglong.profiles.cluster_config",
             "qinglong.profiles.worker", "qinglong.profiles.worker_config",
             "qinglong.profiles.registration", "qinglong.profiles.availability",
             "qinglong.profiles.run_notifier")

SCRIPT = textwrap.dedent("""
    import json, sys
    from qinglong.cli.main import main

    def ql(*args):
        try:
            main(list(args))
        except SystemExit as exit:
            assert exit.code == 0, (args, exit.code)

    url = sys.argv[1]
    ql("db", "migrate", "--database-url", url)
    ql("project", "create", "demo", "--database-url", url)
    ql("task", "publish", "--database-url", url, "--project", "demo", "--task", "t", "--shell", "true")
    ql("trigger", "publish", "--database-url", url, "--project", "demo", "--trigger", "every",
       "--task", "t", "--cron", "* * * * * *", "--timezone", "UTC")
    ql("serve", "--database-url", url, "--profile", sys.argv[2], "--interval", "250ms",
       "--duration", "2500ms", "--quiet")
    ql("run", "list", "--database-url", url, "--json")
    ql("trigger", "list", "--database-url", url, "--project", "demo")
    print(json.dumps(sorted(sys.modules)), file=sys.stderr)
""")


@pytest.mark.parametrize("profile", ["standalone", "edge"])
def test_sqlite_profiles_never_import_postgres_code(tmp_path: Path, profile: str) -> None:
    assert importlib.util.find_spec("psycopg") is not None  # installed, so the check can fail
    url = f"sqlite:///{tmp_path / 'iso.db'}"
    done = subprocess.run([sys.executable, "-c", SCRIPT, url, profile], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    modules = json.loads(done.stderr.strip().splitlines()[-1])
    # the one coordinator and the one kernel, over the SQLite driver
    assert {"qinglong.profiles.local", "qinglong.scheduler.coordinator", "qinglong.storage.kernel",
            "qinglong.storage.sqlite.driver", "qinglong.storage.admission.schedules"} <= set(modules)
    loaded = [m for m in modules if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
    assert loaded == []
    runs = json.loads(done.stdout[done.stdout.index("["):done.stdout.rindex("]") + 1])
    assert runs and all(r["status"] in {"succeeded", "queued", "running", "dispatching"}
                        or given_back_at_stop(r) for r in runs), runs


def given_back_at_stop(run: dict[str, object]) -> bool:
    """A Run leased in the instant `ql serve` stopped: its job saw the stop before spawning
    and gave it back, queued again through retry_wait with no attempt spent and no error of
    its own (domain/lifecycle.py, interrupt). Nothing else leaves this task in retry_wait: it
    has no retry policy, so a failure would end the Run failed."""
    return run["status"] == "retry_wait" and run["error_code"] is None
