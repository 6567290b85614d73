"""Issue 18, item 2: `ql export` then `ql apply` is a round trip.

A property: whatever tasks and triggers are published (every spec field, environment entries
named HOME, PATH or LANG, every trigger kind and option, awkward texts), exporting them and
applying the file changes nothing -- `--dry-run` reports every project, task and trigger
unchanged and a real apply leaves every revision and digest as it was, whatever the
environment of `ql apply` holds -- and applying the file to a fresh database then exporting
again gives the same bytes. On SQLite and on PostgreSQL.

Secrets (environment values given with `{from_env: VARIABLE}`) are the one thing an export
cannot hold: they are written as `{secret: stored}`, which never reads the environment of
`ql apply`, keeps the stored value where there is one, and is refused, naming file, line and
entry, where there is none.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qinglong.domain.occurrences import instant_text
from qinglong.service.definition_fields import format_duration
from tests.e2e.test_cli_errors import Result, dump, ql  # noqa: F401
from tests.support.pg import PgServer, create_database, drop_database, provision_roles

Ql = Callable[..., Result]

# Texts YAML likes to read as something else, or to quote, fold or escape.
TRICKY = ["off", "true", "yes", "null", "~", "0755", "8080", "1e3", "0x1F", "2026-01-01",
          "a: b # c", "*/5", "- x", "'q'", '"dq"', "$HOME", "50%", "\\%", "ünï 中文", "tab\there",
          "line1\nline2", "end\n", "\n", " lead", "trail ", "{a: 1}", "[x]", "@at", "`tick`",
          "&anchor", "!tag", "|", ">", "#", "=", "\u2028", "\x85", "\x7f", "\ufeff"]
texts = st.one_of(
    st.lists(st.sampled_from(TRICKY), max_size=3).map("".join),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            max_size=8))
names = texts.filter(lambda t: 1 <= len(t) <= 255 and not any(
    ord(c) < 32 or ord(c) == 127 for c in t))
ENV_NAMES = ["HOME", "PATH", "LANG", "TZ", "lower_case", "_U", "X1"]
CRONS = ["0 3 * * *", "*/5 * * * *", "30 2 * * SUN", "0 0 1 1 *", "*/10 * * * * *",
         "15 8 * * MON-FRI", "0 30 2 * * *"]
WALL_CLOCK = {"0 3 * * *", "30 2 * * SUN", "0 0 1 1 *", "15 8 * * MON-FRI", "0 30 2 * * *"}
ZONES = ["UTC", "Asia/Shanghai", "Europe/Berlin", "America/New_York", "US/Eastern", "Etc/GMT-8"]
DIRS = ["/tmp", "/", "/usr"]
REQUIRES = ["gpu", "region=eu", "disk=SSD.v2", "arch/x86", "zone=eu-1"]  # distinct keys
NOW_S = int(time.time())


@dataclass
class Project:
    id: str
    name: str | None
    commands: list[list[str]] = field(default_factory=list)  # ql ... argv, in order


@st.composite
def task_args(draw: st.DrawFn, project: str, task: str, enabled: bool) -> list[str]:
    args = ["task", "publish", f"--project={project}", f"--task={task}"]
    if draw(st.booleans()):
        args.append(f"--name={draw(names)}")
    for name in draw(st.lists(st.sampled_from(ENV_NAMES), unique=True, max_size=4)):
        args.append(f"--env={name}={draw(texts)}")
    if draw(st.booleans()):
        args.append(f"--cwd={draw(st.sampled_from(DIRS))}")
    if draw(st.booleans()):
        args.append(f"--timeout={format_duration(draw(st.integers(1, 365 * 86_400_000)))}")
    if draw(st.booleans()):
        backoff = draw(st.integers(100, 86_400_000))
        args += [f"--max-attempts={draw(st.integers(1, 100))}",
                 f"--retry-backoff={format_duration(backoff)}",
                 f"--retry-max-backoff={format_duration(draw(st.integers(backoff, 86_400_000)))}",
                 "--retry-on-exit=" + (",".join(str(c) for c in draw(
                     st.lists(st.integers(1, 255), min_size=1, max_size=4))) or "any"),
                 draw(st.sampled_from(["--retry-on-timeout", "--no-retry-on-timeout"]))]
    if draw(st.booleans()):
        args.append("--idempotent")
    if draw(st.booleans()):
        args.append(f"--concurrency={draw(st.integers(1, 10_000))}")
    for token in draw(st.lists(st.sampled_from(REQUIRES), unique=True, max_size=3)):
        args.append(f"--requires={token}")
    for name in draw(st.lists(st.sampled_from(["who", "count", "flag"]), unique=True,
                              max_size=3)):
        args.append({"who": f"--param=who={draw(texts)}",
                     "count": f"--param=count:int={draw(st.integers(-10**6, 10**6))}",
                     "flag": f"--param=flag:bool={draw(st.sampled_from(['true', 'false']))}",
                     }[name])
    if draw(st.booleans()):
        args.append(f"--memory-limit={draw(st.sampled_from(['16M', '512M', '3G', '1T']))}")
    if draw(st.booleans()):
        args.append(f"--cpu-limit={format_duration(draw(st.integers(1, 2_592_000)) * 1000)}")
    if not enabled:
        args.append("--disabled")
    if draw(st.booleans()):
        command = draw(texts.filter(lambda t: t.strip() != ""))
        args += [f"--shell={command}"] + (["--bash"] if draw(st.booleans()) else [])
    else:
        args += ["--argv", "--", draw(st.sampled_from(["/bin/echo", "/usr/bin/env"])),
                 *draw(st.lists(texts, max_size=4))]
    return args


@st.composite
def trigger_args(draw: st.DrawFn, project: str, trigger: str, task: str,
                 task_enabled: bool) -> list[str]:
    args = ["trigger", "publish", f"--project={project}", f"--trigger={trigger}", f"--task={task}"]
    kind = draw(st.sampled_from(["cron", "every", "at"]))
    zone = draw(st.sampled_from(ZONES))
    if kind == "cron":
        cron = draw(st.sampled_from(CRONS))
        args += [f"--cron={cron}", f"--timezone={zone}"]
        if cron in WALL_CLOCK and draw(st.booleans()):
            args += [f"--dst-gap={draw(st.sampled_from(['shift', 'skip']))}",
                     f"--dst-overlap={draw(st.sampled_from(['first', 'second', 'both']))}"]
    elif kind == "every":
        args.append(f"--every={draw(st.integers(1, 366 * 86_400))}s")
        if draw(st.booleans()):
            anchor_s = draw(st.integers(946_684_800, 4_102_444_800))  # 2000 .. 2100
            args.append(f"--anchor={instant_text(anchor_s * 1000)}")
    else:
        at_s = NOW_S + draw(st.integers(86_400, 3 * 365 * 86_400))
        args.append(f"--at={instant_text(at_s * 1000)}")
    if kind != "cron" and draw(st.booleans()):
        args.append(f"--timezone={zone}")
    if draw(st.booleans()):
        jitter = draw(st.integers(1, 3600))
        args += [f"--jitter={jitter}s", f"--jitter-random={draw(st.integers(0, jitter))}s"]
    args.append(f"--misfire={draw(st.sampled_from(['skip', 'fire_once']))}")
    overlap = draw(st.sampled_from(["allow", "skip", "queue", "cancel_previous"]))
    args.append(f"--overlap={overlap}")
    if overlap == "queue" and draw(st.booleans()):
        args.append(f"--overlap-queue-limit={draw(st.integers(0, 1000))}")
    if not task_enabled or draw(st.integers(0, 3)) == 0:
        args.append("--disabled")
    return args


@st.composite
def projects(draw: st.DrawFn) -> list[Project]:
    made = []
    for index in range(draw(st.integers(1, 2))):
        project = Project(id=f"p{index}", name=draw(st.none() | names))
        tasks = [(f"t{i}", draw(st.integers(0, 4)) > 0) for i in range(draw(st.integers(1, 4)))]
        for task, enabled in tasks:
            project.commands.append(draw(task_args(project.id, task, enabled)))
        for number in range(draw(st.integers(0, 5))):
            task, enabled = draw(st.sampled_from(tasks))
            project.commands.append(draw(trigger_args(project.id, f"r{number}", task, enabled)))
        made.append(project)
    return made


# --- the databases -------------------------------------------------------------------------

_COUNT = itertools.count(1)


def on(ql: Ql, url: str) -> Ql:  # noqa: F811
    """``ql`` on the database at ``url`` (given as QL_DATABASE_URL: a program's arguments come
    last on a `ql task publish --argv` line)."""

    def run(*argv: str) -> Result:
        saved = os.environ.get("QL_DATABASE_URL")
        os.environ["QL_DATABASE_URL"] = url
        try:
            return ql(*argv)
        finally:
            if saved is None:
                del os.environ["QL_DATABASE_URL"]
            else:
                os.environ["QL_DATABASE_URL"] = saved

    return run


@contextmanager
def sqlite_database(ql: Ql, root: Path) -> Iterator[Ql]:  # noqa: F811
    run = on(ql, f"sqlite:///{root / f'db{next(_COUNT)}.db'}")
    ok(run("db", "migrate"))
    yield run


@contextmanager
def postgres_database(ql: Ql, server: PgServer, template: str) -> Iterator[Ql]:  # noqa: F811
    name = f"qldefs_{os.getpid()}_{next(_COUNT)}"
    create_database(server, name, template=template)
    with server.connect(name) as conn:
        provision_roles(conn)
    try:
        yield on(ql, server.url("ql_admin", name))
    finally:
        drop_database(server, name)


def ok(result: Result) -> Result:
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    return result


def digests(run: Ql, project_ids: list[str]) -> dict[str, object]:
    """Every task's and trigger's revision and digest (deleted ones included)."""
    seen: dict[str, object] = {}
    for project in project_ids:
        for item in json.loads(ok(run("task", "list", "--project", project, "--all",
                                      "--json")).out):
            seen[f"{project}/task/{item['task']}"] = (item["revision"], item["content_digest"])
        for item in json.loads(ok(run("trigger", "list", "--project", project, "--all",
                                      "--json")).out):
            seen[f"{project}/trigger/{item['trigger']}"] = (
                item["revision"], item["content_digest"], item["task_revision"])
    return seen


@contextmanager
def hostile_environment(values: dict[str, str]) -> Iterator[None]:
    """The environment of `ql apply` holds other values under the entries' names."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


OTHER_ENV = {name: f"/applier/{name}" for name in ENV_NAMES}


def round_trip(made: list[Project], open_database: Callable[[], AbstractContextManager[Ql]],
               root: Path) -> None:
    ids = [p.id for p in made]
    with open_database() as first:
        for project in made:
            ok(first("project", "create", project.id,
                     *([f"--name={project.name}"] if project.name else [])))
            for command in project.commands:
                ok(first(*command))
        export = root / f"export{next(_COUNT)}.yaml"
        exported = ok(first("export", "-o", str(export)))
        assert "secret" not in exported.err, exported.err  # nothing here is a secret
        text = export.read_bytes()
        before = digests(first, ids)
        with hostile_environment(OTHER_ENV):
            planned = json.loads(ok(first("apply", "-f", str(export), "--dry-run",
                                          "--json")).out)
            assert [(c["kind"], c["id"], c["action"], c["fields"]) for c in planned["changes"]
                    if c["action"] != "unchanged"] == []
            assert planned["counts"]["unchanged"] == len(before)
            applied = ok(first("apply", "-f", str(export)))
            assert applied.out.rstrip().endswith(f"nothing to change: {len(before)} unchanged")
        assert digests(first, ids) == before
        with open_database() as fresh, hostile_environment(OTHER_ENV):
            ok(fresh("apply", "-f", str(export)))
            again = root / f"again{next(_COUNT)}.yaml"
            ok(fresh("export", "-o", str(again)))
            assert again.read_bytes() == text


PROPERTY = settings(max_examples=30, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.data_too_large])


@PROPERTY
@given(made=projects())
def test_export_then_apply_changes_nothing_on_sqlite(ql: Ql, tmp_path: Path,  # noqa: F811
                                                      made: list[Project]) -> None:
    round_trip(made, lambda: sqlite_database(ql, tmp_path), tmp_path)


@settings(PROPERTY, max_examples=10)
@given(made=projects())
def test_export_then_apply_changes_nothing_on_postgresql(
        ql: Ql, pg_server: PgServer, pg_template: str, tmp_path: Path,  # noqa: F811
        made: list[Project]) -> None:
    round_trip(made, lambda: postgres_database(ql, pg_server, pg_template), tmp_path)


# --- the issue's own steps ------------------------------------------------------------------


def test_the_issue_steps_report_no_change(ql: Ql, tmp_path: Path,  # noqa: F811
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with sqlite_database(ql, tmp_path) as run:
        ok(run("project", "create", "p"))
        ok(run("task", "publish", "--project", "p", "--task", "envtest", "--env",
               "HOME=/srv/app", "--shell", "echo $HOME"))
        ok(run("export", "-o", "e.yaml"))
        text = (tmp_path / "e.yaml").read_text()
        assert "      HOME: /srv/app\n" in text
        assert "from_env" not in text.split("---", 1)[1]
        monkeypatch.setenv("HOME", "/home/someone-else")
        planned = ok(run("apply", "-f", "e.yaml", "--dry-run"))
        assert planned.out == ("task p/envtest: unchanged (now revision 1)\n"
                               "dry run: nothing would change; 1 unchanged; nothing was written\n")
