"""Project environments and secrets end to end on SQLite (issue 22, item 3): `ql env set`
plain and secret values, `ql serve` injecting the enabled ones into a Run (a task's own entry
wins), `ql run show` naming the revision it ran with; a server without the key fails the Run
with a clear code and a line in its log, never running it with part of its environment; the
secret is in no listing, no export and not in the database file; `ql secret rotate-key`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.ql import Ql, wait_for

SECRET = "hunter2-correct-horse"


def _setup(tmp_path: Path) -> tuple[Ql, Path, Path]:
    q = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path)
    q.run("db", "migrate")
    q.run("project", "create", "demo")
    q.run("secret", "new-key", "--out", "old.key")
    out = tmp_path / "seen.txt"
    q.run("task", "publish", "--project", "demo", "--task", "show", "--env", "WINS=task",
          "--shell", f"printf '%s|%s|%s|%s\\n' \"$REGION\" \"$TOKEN\" \"$WINS\" "
                     f"\"${{OFF-unset}}\" > {out}")
    q.run("env", "set", "--project", "demo", "REGION", "--value", "eu-west",
          "--description", "where we run")
    q.run("env", "set", "--project", "demo", "WINS", "--value", "project")
    q.run("env", "set", "--project", "demo", "OFF", "--value", "x", "--disable")
    (tmp_path / "token.txt").write_text(SECRET + "\n")
    keyed = Ql(q.database_url, cwd=tmp_path, env={"QL_SECRET_KEY_FILE": "old.key"})
    keyed.run("env", "set", "--project", "demo", "TOKEN", "--value-file", "token.txt",
              "--secret")
    return q, out, tmp_path / "old.key"


def _run_once(q: Ql, request_id: str, key_file: Path | None) -> dict[str, Any]:
    run = q.json("task", "run", "--project", "demo", "--task", "show",
                 "--request-id", request_id)
    env = {} if key_file is None else {"QL_SECRET_KEY_FILE": str(key_file)}
    server = Ql(q.database_url, cwd=q.cwd, env=env).start("serve", "--interval", "250ms")
    try:
        def ended() -> dict[str, Any] | None:
            shown: dict[str, Any] = q.json("run", "show", run["id"])
            return shown if shown["run"]["status"] in ("succeeded", "failed") else None
        return wait_for(ended, 60, "the Run to end")  # type: ignore[no-any-return]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_run_gets_the_projects_environment_and_records_its_revision(tmp_path: Path) -> None:
    q, out, key = _setup(tmp_path)
    listed = q.json("env", "ls", "--project", "demo")
    assert listed["revision"] == 4
    shown = _run_once(q, "r-1", key)
    assert shown["run"]["status"] == "succeeded", shown
    assert out.read_text() == f"eu-west|{SECRET}|task|unset\n"  # the task's entry wins
    [attempt] = shown["attempts"]
    assert (attempt["environment_revision"], attempt["environment_digest"]) == (
        4, listed["digest"])
    text = q.run("run", "show", shown["run"]["id"]).stdout
    assert f"environment revision 4 ({listed['digest']})" in text
    # the secret is in no listing, no history, no export, and not in the database file
    seen = [q.run("env", "ls", "--project", "demo").stdout,
            q.run("env", "show", "TOKEN", "--project", "demo", "--json").stdout,
            q.run("env", "history", "--project", "demo", "--json").stdout,
            q.run("export").stdout, json.dumps(shown)]
    assert not any(SECRET in text for text in seen)
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("ql.db*") if p.is_file())
    assert SECRET.encode() not in stored and b"eu-west" in stored


def test_without_the_key_the_run_fails_and_never_starts(tmp_path: Path) -> None:
    q, out, _ = _setup(tmp_path)
    shown = _run_once(q, "r-nokey", None)
    assert shown["run"]["status"] == "failed"
    assert shown["run"]["error_code"] == "ENVIRONMENT_UNAVAILABLE", shown["run"]
    assert shown["run"]["error_summary"].startswith("QL_SECRET_KEY_MISSING")
    assert not out.exists()
    logs = q.run("run", "logs", shown["run"]["id"]).stdout
    assert "QL_SECRET_KEY_MISSING" in logs and "project environment revision 4" in logs
    assert SECRET not in logs


def test_rotate_key_seals_again_and_the_old_key_no_longer_opens(tmp_path: Path) -> None:
    q, out, old = _setup(tmp_path)
    q.run("secret", "new-key", "--out", "new.key")
    q.run("secret", "new-key", "--out", "other.key")
    wrong = q.run("secret", "rotate-key", "--old-key-file", "other.key", "--new-key-file",
                  "new.key", "--json", check=False)
    assert wrong.returncode == 2
    assert json.loads(wrong.stderr)["error"]["code"] == "QL_SECRET_KEY_MISMATCH"
    done = q.json("secret", "rotate-key", "--old-key-file", "old.key", "--new-key-file",
                  "new.key")
    assert done["resealed"] == 1 and not done["already"]
    stale = _run_once(q, "r-old", old)
    assert stale["run"]["status"] == "failed"
    assert "QL_SECRET_KEY_MISMATCH" in stale["run"]["error_summary"]
    fresh = _run_once(q, "r-new", tmp_path / "new.key")
    assert fresh["run"]["status"] == "succeeded"
    assert out.read_text() == f"eu-west|{SECRET}|task|unset\n"
