"""Interval and one-shot triggers in definition files: `ql apply` creates them (an interval
without an anchor is anchored at its publish and keeps that anchor), a second apply writes
nothing, `--dry-run` shows their fields, `ql export` writes them back so that export-then-apply
is a no-op (here and in a fresh database), and their mistakes name file, line and field."""

from __future__ import annotations

import json
import os
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from qinglong.domain.occurrences import instant_text
from tests.e2e.test_cli_errors import Result, dump, ql  # noqa: F401
from tests.support.pg import PgTestDatabase

Cli = Callable[..., Result]

LATER = instant_text((int(time.time()) + 30 * 86_400) * 1000)  # a month from now

JOBS = f"""\
apiVersion: qinglong/v1
project: demo
tasks:
  hello:
    shell: echo hello
triggers:
  beat:
    task: hello
    every: 90s
  hourly:
    task: hello
    every: 1h
    anchor: 2026-01-01T00:15:00+08:00
    timezone: Asia/Shanghai
    misfire: fire_once
  launch:
    task: hello
    at: {LATER}
  nightly:
    task: hello
    cron: "0 3 * * *"
    timezone: Europe/Berlin
"""


def ok(result: Result) -> Result:
    assert result.code == 0, result.err
    assert "Traceback" not in result.err
    return result


def write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text))
    return os.path.relpath(path)


def on(ql: Cli, url: str) -> Cli:  # noqa: F811
    def run(*argv: str) -> Result:
        return ql(*argv, "--database-url", url)

    return run


@pytest.fixture
def db(ql: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:  # noqa: F811
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    run = on(ql, f"sqlite:///{tmp_path / 'ql.db'}")
    ok(run("db", "migrate"))
    return run


def triggers(run: Cli) -> dict[str, dict[str, object]]:
    return {t["trigger"]: t for t in json.loads(ok(run("trigger", "list", "--json")).out)}


def test_apply_creates_each_kind_and_a_second_apply_writes_nothing(db: Cli,
                                                                    tmp_path: Path) -> None:
    jobs = write(tmp_path / "jobs.yaml", JOBS)
    created = ok(db("apply", "-f", jobs))
    assert created.out.rstrip().endswith("applied: 6 created; 0 unchanged")
    assert '    every: "1m30s"\n    anchor: "(the publish time)"\n' in created.out
    assert f'    at: "{LATER}"\n' in created.out
    listed = triggers(db)
    beat, hourly, launch = listed["beat"], listed["hourly"], listed["launch"]
    assert (beat["kind"], beat["every_s"], beat["timezone"]) == ("interval", 90, "UTC")
    assert abs(int(str(beat["anchor_ms"])) - int(str(beat["published_at_ms"]))) < 1_000
    assert (hourly["schedule"], hourly["misfire"]) == (
        "every 1h from 2025-12-31T16:15:00Z", "fire_once")
    assert (launch["kind"], launch["schedule"]) == ("once", f"at {LATER}")
    assert listed["nightly"]["cron"] == "0 3 * * *"
    before = dump(tmp_path / "ql.db")
    again = ok(db("apply", "-f", jobs))
    assert again.out.rstrip().endswith("nothing to change: 5 unchanged")
    assert dump(tmp_path / "ql.db") == before  # the anchor was kept, not moved to "now"


def test_dry_run_shows_the_fields_of_each_kind(db: Cli, tmp_path: Path) -> None:
    ok(db("apply", "-f", write(tmp_path / "jobs.yaml", JOBS)))
    anchor = str(triggers(db)["beat"]["schedule"]).split(" from ")[1]
    edited = JOBS.replace("every: 90s", "every: 2m").replace(
        'cron: "0 3 * * *"', "every: 1d\n    anchor: 2026-01-01T02:00:00Z")
    planned = json.loads(ok(db("apply", "-f", write(tmp_path / "edited.yaml", edited),
                               "--dry-run", "--json")).out)
    fields = {c["id"]: c["fields"] for c in planned["changes"] if c["kind"] == "trigger"}
    assert fields["beat"] == [{"field": "every", "from": "1m30s", "to": "2m"}]
    assert fields["nightly"] == [
        {"field": "cron", "from": "0 3 * * *", "to": None},
        {"field": "every", "from": None, "to": "1d"},
        {"field": "anchor", "from": None, "to": "2026-01-01T02:00:00Z"},
    ]
    applied = ok(db("apply", "-f", "edited.yaml"))
    assert "trigger demo/beat: changed (revision 2)" in applied.out
    assert triggers(db)["beat"]["schedule"] == f"every 2m from {anchor}"


def test_export_writes_the_kinds_and_applying_it_changes_nothing(db: Cli, ql: Cli,  # noqa: F811
                                                                 tmp_path: Path) -> None:
    ok(db("apply", "-f", write(tmp_path / "jobs.yaml", JOBS)))
    exported = ok(db("export")).out
    beat_anchor = str(triggers(db)["beat"]["schedule"]).split(" from ")[1]
    assert f"  beat:\n    task: hello\n    every: 1m30s\n    anchor: '{beat_anchor}'\n" in exported
    assert ("  hourly:\n    task: hello\n    every: 1h\n    anchor: '2025-12-31T16:15:00Z'\n"
            "    timezone: Asia/Shanghai\n    misfire: fire_once\n") in exported
    assert f"  launch:\n    task: hello\n    at: '{LATER}'\n" in exported
    (tmp_path / "all.yaml").write_text(exported)
    assert ok(db("apply", "-f", "all.yaml")).out.rstrip().endswith("nothing to change: 5 unchanged")
    fresh = on(ql, f"sqlite:///{tmp_path / 'fresh.db'}")
    ok(fresh("db", "migrate"))
    ok(fresh("apply", "-f", "all.yaml"))
    digests = {t: v["content_digest"] for t, v in triggers(db).items()}
    assert {t: v["content_digest"] for t, v in triggers(fresh).items()} == digests


PROBLEMS = [
    ("    cron: \"0 3 * * *\"\n", "    cron: \"0 3 * * *\"\n    every: 1h\n",
     "triggers.nightly.every: give one schedule, not cron and every"),
    ("    at: " + LATER + "\n", "    at: " + LATER + "\n    anchor: 2026-01-01T00:00:00Z\n",
     "triggers.launch.anchor: applies only to every"),
    ("    at: " + LATER + "\n", "    at: 2020-01-01T00:00:00Z\n",
     "triggers.launch.at: 2020-01-01T00:00:00Z is in the past"),
    ("    every: 90s\n", "    every: 1500ms\n", "triggers.beat.every: must be whole seconds"),
    ("    every: 90s\n", "    every: 400d\n", "triggers.beat.every: must be from 1s to 366d"),
    ("    every: 90s\n", "    every: 90\n", "triggers.beat.every: must be a duration with a unit"),
    ("    every: 1h\n    anchor: 2026-01-01T00:15:00+08:00\n",
     "    every: 1h\n    anchor: 2026-01-01 00:15\n", "triggers.hourly.anchor:"),
    ("    task: hello\n    every: 90s\n", "    task: hello\n", "triggers.beat.cron: needs a schedule"),
    ('    cron: "0 3 * * *"\n    timezone: Europe/Berlin\n', '    cron: "0 3 * * *"\n',
     "triggers.nightly.timezone: is required"),
]


# ids without the clock: pytest-xdist workers must collect the same test names
@pytest.mark.parametrize(("old", "new", "message"), PROBLEMS,
                         ids=[message.split(":", 1)[0] + f"-{n}"
                              for n, (_o, _n, message) in enumerate(PROBLEMS)])
def test_each_mistake_names_its_line_and_field_and_nothing_is_written(
        db: Cli, tmp_path: Path, old: str, new: str, message: str) -> None:
    assert old in JOBS
    text = JOBS.replace(old, new, 1)
    refused = db("apply", "-f", write(tmp_path / "jobs.yaml", text))
    assert refused.code == 2, refused.out
    first = refused.err.splitlines()[0]
    assert first.startswith("jobs.yaml:") and message in first, refused.err
    assert json.loads(ok(db("project", "list", "--json")).out) == []  # nothing was written


def test_a_past_instant_is_accepted_as_a_disabled_record(db: Cli, tmp_path: Path) -> None:
    text = JOBS.replace("    at: " + LATER + "\n",
                        "    at: 2020-01-01T00:00:00Z\n    enabled: false\n")
    ok(db("apply", "-f", write(tmp_path / "jobs.yaml", text)))
    assert triggers(db)["launch"]["state"] == "disabled"


def test_the_kinds_on_postgresql(ql: Cli, pg_db: PgTestDatabase, tmp_path: Path,  # noqa: F811
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    admin = on(ql, pg_db.url("ql_admin"))
    jobs = write(tmp_path / "jobs.yaml", JOBS)
    assert ok(admin("apply", "-f", jobs)).out.rstrip().endswith("applied: 6 created; 0 unchanged")
    assert ok(admin("apply", "-f", jobs)).out.rstrip().endswith("nothing to change: 5 unchanged")
    (tmp_path / "all.yaml").write_text(ok(admin("export")).out)
    assert ok(admin("apply", "-f", "all.yaml")).out.rstrip().endswith(
        "nothing to change: 5 unchanged")
    kinds = {t: v["kind"] for t, v in triggers(admin).items()}
    assert kinds == {"beat": "interval", "hourly": "interval", "launch": "once", "nightly": "cron"}


def test_dst_policies_in_files(db: Cli, tmp_path: Path) -> None:
    text = JOBS.replace('    timezone: Europe/Berlin\n',
                        '    timezone: Europe/Berlin\n    dst_gap: skip\n    dst_overlap: both\n')
    created = ok(db("apply", "-f", write(tmp_path / "jobs.yaml", text)))
    assert '    dst_gap: "skip"\n    dst_overlap: "both"\n' in created.out
    assert triggers(db)["nightly"]["dst"] == {"gap": "skip", "overlap": "both"}
    assert ok(db("apply", "-f", "jobs.yaml")).out.rstrip().endswith("nothing to change: 5 unchanged")
    exported = ok(db("export")).out
    assert ('    cron: 0 3 * * *\n    timezone: Europe/Berlin\n    dst_gap: skip\n'
            '    dst_overlap: both\n') in exported
    (tmp_path / "all.yaml").write_text(exported)
    assert ok(db("apply", "-f", "all.yaml")).out.rstrip().endswith("nothing to change: 5 unchanged")
    plain = write(tmp_path / "plain.yaml", JOBS)  # the keys left out: back to the defaults
    planned = json.loads(ok(db("apply", "-f", plain, "--dry-run", "--json")).out)
    [nightly] = [c for c in planned["changes"] if c["id"] == "nightly"]
    assert nightly["fields"] == [{"field": "dst_gap", "from": "skip", "to": "shift"},
                                 {"field": "dst_overlap", "from": "both", "to": "first"}]


@pytest.mark.parametrize(("addition", "message"), [
    ("    dst_gap: sometimes\n", "triggers.nightly.dst_gap: must be shift or skip"),
    ("    dst_overlap: twice\n", "triggers.nightly.dst_overlap: must be first, second or both"),
])
def test_bad_dst_policies_in_files(db: Cli, tmp_path: Path, addition: str, message: str) -> None:
    text = JOBS.replace('    timezone: Europe/Berlin\n', '    timezone: Europe/Berlin\n' + addition)
    refused = db("apply", "-f", write(tmp_path / "jobs.yaml", text))
    assert refused.code == 2 and message in refused.err.splitlines()[0], refused.err


def test_a_dst_policy_only_fits_a_wall_clock_cron(db: Cli, tmp_path: Path) -> None:
    interval = JOBS.replace('    every: 90s\n', '    every: 90s\n    dst_gap: skip\n')
    refused = db("apply", "-f", write(tmp_path / "a.yaml", interval))
    assert refused.code == 2 and "triggers.beat.dst_gap: applies only to cron" in refused.err
    hourly = JOBS.replace('    cron: "0 3 * * *"\n    timezone: Europe/Berlin\n',
                          '    cron: "0 * * * *"\n    timezone: Europe/Berlin\n'
                          '    dst_overlap: second\n')
    refused = db("apply", "-f", write(tmp_path / "b.yaml", hourly))
    assert refused.code == 2
    assert "triggers.nightly.dst_overlap: applies only to wall-clock expressions" in refused.err
    assert "dst_gap: shift and dst_overlap: first" in refused.err


def test_jitter_in_files(db: Cli, tmp_path: Path) -> None:
    text = JOBS.replace("    every: 90s\n", "    every: 90s\n    jitter: 30s\n    jitter_random: 10s\n")
    ok(db("apply", "-f", write(tmp_path / "jobs.yaml", text)))
    beat = triggers(db)["beat"]
    assert beat["jitter"]["max_s"] == 30 and beat["jitter"]["random_s"] == 10  # type: ignore[index]
    assert ok(db("apply", "-f", "jobs.yaml")).out.rstrip().endswith("nothing to change: 5 unchanged")
    exported = ok(db("export")).out
    assert "    jitter: 30s\n    jitter_random: 10s\n" in exported
    (tmp_path / "all.yaml").write_text(exported)
    assert ok(db("apply", "-f", "all.yaml")).out.rstrip().endswith("nothing to change: 5 unchanged")
    planned = json.loads(ok(db("apply", "-f", write(tmp_path / "plain.yaml", JOBS), "--dry-run",
                               "--json")).out)
    [change] = [c for c in planned["changes"] if c["id"] == "beat"]
    assert change["fields"] == [{"field": "jitter", "from": "30s", "to": None},
                                {"field": "jitter_random", "from": "10s", "to": None}]


@pytest.mark.parametrize(("addition", "message"), [
    ("    jitter: 2h\n", "triggers.beat.jitter: must be from 1s to 1h"),
    ("    jitter: 1500ms\n", "triggers.beat.jitter: must be whole seconds"),
    ("    jitter: 10s\n    jitter_random: 20s\n", "triggers.beat.jitter_random: must be from 0s"),
    ("    jitter_random: 20s\n", "triggers.beat.jitter_random: is a part of jitter"),
])
def test_bad_jitters_in_files(db: Cli, tmp_path: Path, addition: str, message: str) -> None:
    text = JOBS.replace("    every: 90s\n", "    every: 90s\n" + addition)
    refused = db("apply", "-f", write(tmp_path / "jobs.yaml", text))
    assert refused.code == 2 and message in refused.err.splitlines()[0], refused.err
