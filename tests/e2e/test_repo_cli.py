"""Git subscriptions end to end on SQLite (issue 22, item 2): `ql repo add --auto-tasks`
against a local bare repository, `ql repo pull` admits a Run of the pull task that a real `ql
serve` executes (its log says what it imported), the scripts' cron lines become tasks whose
Runs then execute the imported content; a second pull with nothing new writes nothing; a
`--dry-run` writes nothing; bad input is one clear line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.contract.test_repo_pulls import Origin
from tests.e2e.test_cli_errors import Result, assert_one_line_error, ql  # noqa: F401
from tests.support.cli_session import PROJECT, Cli, as_json, ok, serving, session
from tests.support.ql import Ql, wait_for


@pytest.fixture
def cli(ql: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:  # noqa: F811
    return session(ql, tmp_path, monkeypatch)


def _ended(cli: Cli, run_id: str) -> dict[str, Any] | None:
    shown: dict[str, Any] = as_json(cli, "run", "show", run_id)
    return shown if shown["run"]["status"] in ("succeeded", "failed") else None


def test_bad_input_and_a_dry_run_write_nothing(cli: Cli, tmp_path: Path) -> None:
    origin = Origin(tmp_path / "git")
    origin.commit({"a.py": "print(1)\n", "b.bin": b"\x00"})
    assert_one_line_error(cli("repo", "add", *PROJECT, "jd", "--url", "not a url"), 2, "url")
    assert_one_line_error(cli("repo", "add", *PROJECT, "jd", "--url", str(origin.bare),
                              "--schedule", "99 * * * *"), 2, "99")
    dry = ok(cli, "repo", "add", *PROJECT, "jd", "--url", str(origin.bare), "--dry-run")
    assert "would save 1" in dry and "jd/a.py" in dry, dry
    assert as_json(cli, "repo", "ls", *PROJECT) == []
    assert as_json(cli, "script", "ls", *PROJECT) == []
    missing = cli("repo", "pull", *PROJECT, "nope")
    assert_one_line_error(missing, missing.code, "nope")


@pytest.mark.slow
def test_serve_runs_the_pull_and_then_the_tasks_it_made(cli: Cli, tmp_path: Path) -> None:
    origin = Origin(tmp_path / "git")
    out = tmp_path / "ran.txt"
    origin.commit({"jd_sign.py": f"# cron: * * * * * *\nopen({str(out)!r}, 'a').write('v1\\n')\n",
                   "README.md": "not a script\n"})
    added = ok(cli, "repo", "add", *PROJECT, "jd", "--url", str(origin.bare), "--auto-tasks")
    assert "pull task repo-jd" in added, added
    with serving(tmp_path):
        run_id = as_json(cli, "repo", "pull", *PROJECT, "jd")["run"]
        shown = wait_for(lambda: _ended(cli, run_id), 60, "the pull Run to end", interval=0.2)
        log = ok(cli, "run", "logs", run_id)
        assert shown["run"]["status"] == "succeeded", log
        assert "saved    jd/jd_sign.py" in log and "task created   jd-jd-sign" in log, log
        # the task the header made runs the imported content every second
        wait_for(lambda: out.exists() and "v1" in out.read_text(), 60,
                 "a Run of the imported script")
        again = as_json(cli, "repo", "pull", *PROJECT, "jd")["run"]
        wait_for(lambda: _ended(cli, again), 60, "the second pull to end", interval=0.2)
        assert "nothing changed" in ok(cli, "run", "logs", again)
    shown_repo = as_json(cli, "repo", "show", *PROJECT, "jd")
    assert shown_repo["last_report"]["saved"] == [] and shown_repo["last_commit"]
    assert [s["path"] for s in as_json(cli, "script", "ls", *PROJECT)] == ["jd/jd_sign.py"]


@pytest.mark.slow
def test_a_private_repository_is_pulled_with_a_project_secret(tmp_path: Path) -> None:
    """The chain an operator sets up: a deploy token stored as a project secret (`ql env set
    --secret`), a subscription naming it (`--token-env`), and `ql serve` started with the key:
    the pull Run gets the token through the project's environment and clones the private
    repository; the token is in no log and no listing."""
    from tests.support.git_http import private_git_server

    token = "ghp_private_deploy_token"
    origin = Origin(tmp_path / "git")
    origin.commit({"secret_job.py": "print('from a private repository')\n"})
    url = f"sqlite:///{tmp_path / 'ql.db'}"
    plain = Ql(url, cwd=tmp_path)
    plain.run("db", "migrate")
    plain.run("project", "create", "demo")
    plain.run("secret", "new-key", "--out", "ql.key")
    keyed = Ql(url, cwd=tmp_path, env={"QL_SECRET_KEY_FILE": str(tmp_path / "ql.key")})
    (tmp_path / "token.txt").write_text(token)
    keyed.run("env", "set", "--project", "demo", "GH_TOKEN", "--secret", "--value-file",
              "token.txt")
    with private_git_server(origin.bare.parent, token) as base:
        keyed.run("repo", "add", "--project", "demo", "priv", "--url",
                  f"{base}/{origin.bare.name}", "--token-env", "GH_TOKEN")
        server = keyed.start("serve", "--interval", "250ms", stdout=tmp_path / "serve.out")
        try:
            run_id = keyed.json("repo", "pull", "--project", "demo", "priv")["run"]
            wait_for(lambda: keyed.json("run", "show", run_id)["run"]["status"]
                     in ("succeeded", "failed"), 60, "the pull to end", interval=0.2)
        finally:
            server.terminate()
            server.wait(timeout=30)
    shown = keyed.json("run", "show", run_id)
    log = keyed.run("run", "logs", run_id).stdout
    assert shown["run"]["status"] == "succeeded", log
    assert "saved    priv/secret_job.py" in log
    listed = keyed.run("env", "ls", "--project", "demo").stdout
    assert token not in log + listed + (tmp_path / "serve.out").read_text()
