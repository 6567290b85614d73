"""Issue 18, item 2: what an export cannot hold is a secret, and it never takes the environment
of `ql apply`.

An environment value given in a file as `{from_env: VARIABLE}` is a secret: `ql export`
writes it as `{secret: stored}` (and says so on stderr). Applying that on the same database
keeps the stored value whatever the environment holds; on a database that has no value for
it, the apply is refused naming file, line and entry, and nothing is written. Plain values
(`ql task publish --env`, a literal in a file) are exported as they are.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.test_cli_errors import Result, dump, ql  # noqa: F401
from tests.support.pg import PgTestDatabase

Ql = Callable[..., Result]
SECRET = "s3cret-never-written"

JOBS = """\
apiVersion: qinglong/v1
project: demo
tasks:
  backup:
    shell: backup --to "$BUCKET"
    env:
      BUCKET: nightly
      HOME: /srv/backup
      TOKEN: {from_env: BACKUP_TOKEN}
"""


def ok(result: Result) -> Result:
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    return result


def on(ql: Ql, url: str) -> Ql:  # noqa: F811
    def run(*argv: str) -> Result:
        return ql(*argv, "--database-url", url)

    return run


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    monkeypatch.setenv("BACKUP_TOKEN", SECRET)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.yaml").write_text(JOBS)
    return tmp_path


def digest(run: Ql) -> str:
    shown = json.loads(ok(run("task", "show", "--project", "demo", "--task", "backup",
                              "--json")).out)
    return str(shown["content_digest"])


def check_secret_round_trip(run: Ql, fresh: Ql, monkeypatch: pytest.MonkeyPatch,
                            place: Path, same_rows: Callable[[], object]) -> None:
    ok(run("apply", "-f", "jobs.yaml"))
    original = digest(run)
    exported = ok(run("export", "-o", "e.yaml"))
    text = (place / "e.yaml").read_text()
    assert SECRET not in text + exported.out + exported.err
    assert ("    env:\n      BUCKET: nightly\n      HOME: /srv/backup\n"
            "      TOKEN: {secret: stored}\n") in text
    assert exported.err == (
        "note: task demo/backup: TOKEN is a secret: written as {secret: stored} (ql apply keeps "
        "the value stored where it applies; another database needs {from_env: VARIABLE})\n")

    # the same database, with other values in the environment: nothing changes
    monkeypatch.setenv("BACKUP_TOKEN", "another-token")
    monkeypatch.setenv("TOKEN", "yet-another")
    monkeypatch.setenv("HOME", "/elsewhere")
    before = same_rows()
    planned = ok(run("apply", "-f", "e.yaml", "--dry-run"))
    assert planned.out.rstrip().endswith("dry run: nothing would change; 1 unchanged; "
                                         "nothing was written")
    assert ok(run("apply", "-f", "e.yaml")).out.rstrip().endswith("nothing to change: 1 unchanged")
    assert same_rows() == before
    assert digest(run) == original

    # a database with no value for it: refused, naming the entry; nothing written
    refused = fresh("apply", "-f", "e.yaml")
    assert refused.code == 2
    assert refused.err.splitlines() == [
        ("e.yaml:13: tasks.backup.env.TOKEN.secret: there is no stored value of TOKEN to keep "
         "(ql export never writes a secret's value); give it as {from_env: VARIABLE} to read "
         "it from the environment of ql apply"),
        "ql: 1 problem in the definitions; nothing was written"]
    assert "demo" not in ok(fresh("project", "list")).out

    # given from the environment there: the same definition, digest for digest
    monkeypatch.setenv("BACKUP_TOKEN", SECRET)
    (place / "e2.yaml").write_text(text.replace("{secret: stored}", "{from_env: BACKUP_TOKEN}"))
    ok(fresh("apply", "-f", "e2.yaml"))
    assert digest(fresh) == original
    assert ok(fresh("export")).out == text


def test_a_secret_is_exported_as_stored_and_never_takes_the_environment_on_sqlite(
        ql: Ql, place: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    run = on(ql, f"sqlite:///{place / 'one.db'}")
    fresh = on(ql, f"sqlite:///{place / 'two.db'}")
    ok(run("db", "migrate"))
    ok(fresh("db", "migrate"))
    check_secret_round_trip(run, fresh, monkeypatch, place, lambda: dump(place / "one.db"))


def test_a_secret_is_exported_as_stored_and_never_takes_the_environment_on_postgresql(
        ql: Ql, pg_db: PgTestDatabase, place: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
        tmp_path: Path) -> None:
    run = on(ql, pg_db.url("ql_admin"))
    fresh = on(ql, f"sqlite:///{tmp_path / 'two.db'}")
    ok(fresh("db", "migrate"))

    def rows() -> object:
        return (pg_db.execute("SELECT project_id, task_id, revision, content_digest "
                              "FROM qinglong.task_definition_revisions ORDER BY 1, 2, 3"),
                pg_db.execute("SELECT project_id, task_id, source_revision, content_digest "
                              "FROM qinglong.task_execution_revisions ORDER BY 1, 2, 3"))

    check_secret_round_trip(run, fresh, monkeypatch, place, rows)


def test_a_plain_value_and_a_secret_switch_kinds_visibly(
        ql: Ql, place: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    run = on(ql, f"sqlite:///{place / 'one.db'}")
    ok(run("db", "migrate"))
    ok(run("apply", "-f", "jobs.yaml"))
    (place / "plain.yaml").write_text(JOBS.replace("{from_env: BACKUP_TOKEN}", SECRET))
    planned = ok(run("apply", "-f", "plain.yaml", "--dry-run"))
    assert "    env.TOKEN: (secret) -> (set)\n" in planned.out
    ok(run("apply", "-f", "plain.yaml"))
    assert f"TOKEN: {SECRET}" in ok(run("export")).out  # a plain value is written out
    diff = ok(run("task", "diff", "--project", "demo", "--task", "backup"))
    assert diff.out == ("task demo/backup: revision 1 -> 2\n"
                        "  env.TOKEN: (secret) -> (set)\n")
    back = ok(run("apply", "-f", "jobs.yaml", "--dry-run"))
    assert "    env.TOKEN: (set) -> (secret)\n" in back.out
    monkeypatch.setenv("BACKUP_TOKEN", "rotated")
    rotated = ok(run("apply", "-f", "jobs.yaml", "--dry-run"))
    assert "    env.TOKEN: (set) -> (secret, changed)\n" in rotated.out


def test_task_publish_sets_a_secret_from_an_environment_variable(
        ql: Ql, place: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    run = on(ql, f"sqlite:///{place / 'one.db'}")
    ok(run("db", "migrate"))
    ok(run("project", "create", "p"))
    publish = ("task", "publish", "--project", "p", "--task", "t", "--env", "HOME=/srv/app",
               "--secret-env", "TOKEN=BACKUP_TOKEN", "--shell", "run")
    ok(run(*publish))
    text = ok(run("export")).out
    assert "      HOME: /srv/app\n      TOKEN: {secret: stored}\n" in text
    assert SECRET not in text
    monkeypatch.delenv("BACKUP_TOKEN")
    unset = run(*publish)
    assert (unset.code, unset.err) == (
        2, "ql: --secret-env: the environment variable BACKUP_TOKEN is not set\n")
    bad = run("task", "publish", "--project", "p", "--task", "t", "--secret-env", "TOKEN")
    assert bad.code == 2
    assert bad.err == ("ql: --secret-env: 'TOKEN' must have the form NAME=VAR (VAR: an "
                       "environment variable of this command)\n")


KEPT = ("jobs.yaml:9: tasks.backup.env.TOKEN.secret: must be stored ({secret: stored} keeps "
        "the secret stored under this name)")
BOTH = ("jobs.yaml:9: tasks.backup.env.TOKEN: must be a string, {from_env: VARIABLE} or "
        "{secret: stored}, not a mapping")


@pytest.mark.parametrize(("value", "message"), [("{secret: kept}", KEPT),
                                                ("{secret: stored, from_env: X}", BOTH)])
def test_a_misspelt_secret_is_refused(ql: Ql, place: Path, value: str,  # noqa: F811
                                      message: str) -> None:
    run = on(ql, f"sqlite:///{place / 'one.db'}")
    ok(run("db", "migrate"))
    (place / "jobs.yaml").write_text(JOBS.replace("{from_env: BACKUP_TOKEN}", value))
    refused = run("apply", "-f", "jobs.yaml")
    assert refused.code == 2
    assert refused.err.splitlines()[0] == message
