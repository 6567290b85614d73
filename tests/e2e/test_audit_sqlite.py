"""`ql audit` on a standalone SQLite database after `ql serve`, and after tampering."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.support.ql import Ql

pytestmark = pytest.mark.slow


def test_audit_after_serve_is_clean_and_a_deleted_run_is_found(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    ql = Ql(f"sqlite:///{path}", tmp_path)
    ql.run("db", "migrate")
    ql.run("project", "create", "demo")
    ql.run("task", "publish", "--project", "demo", "--task", "t", "--argv", "/bin/true")
    ql.run("trigger", "publish", "--project", "demo", "--trigger", "every", "--task", "t",
           "--cron", "* * * * * *", "--timezone", "Asia/Shanghai")
    ql.run("serve", "--duration", "8s", "--quiet", timeout=60)
    # the window ends where serve stopped (no scheduler runs now), less the 5 s settle
    clean = ql.run("audit", "--json", check=False)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    report = json.loads(clean.stdout)
    assert report["ok"] and report["totals"]["admitted"] >= 3
    assert report["totals"]["admitted"] == report["totals"]["expected"]
    conn = sqlite3.connect(path)
    victim = conn.execute("SELECT id FROM runs ORDER BY scheduled_for_ms LIMIT 1").fetchone()[0]
    conn.execute("DELETE FROM run_events WHERE run_id = ?", (victim,))
    conn.execute("DELETE FROM run_attempts WHERE run_id = ?", (victim,))
    conn.execute("DELETE FROM runs WHERE id = ?", (victim,))
    conn.commit()
    conn.close()
    broken = ql.run("audit", "--json", check=False)
    assert broken.returncode == 5
    assert json.loads(broken.stdout)["totals"]["gaps_unexplained"] == 1
