"""Interval and one-shot triggers from the command line: `ql trigger publish --every/--anchor/--at`,
`ql trigger preview` of every kind, lists that show a one-shot trigger as done, and real
schedulers -- `ql serve` on SQLite and a `ql control` replica on each PostgreSQL server -- that
run an interval trigger on its grid and a one-shot trigger exactly once, judged by `ql audit`
and the ledger."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from qinglong.domain.occurrences import instant_text
from testkit.cluster import Replica
from tests.e2e.test_cli_errors import Result, assert_one_line_error, ql  # noqa: F401
from tests.support.pg import PgTestDatabase
from tests.support.ql import Ql, wait_for

Cli = Callable[..., Result]


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


@pytest.fixture
def cli(ql: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:  # noqa: F811
    monkeypatch.delenv("QL_DATABASE_URL", raising=False)
    url = f"sqlite:///{tmp_path / 'ql.db'}"

    def run(*argv: str) -> Result:
        return ql(*argv, "--database-url", url)

    for argv in (("db", "migrate"), ("project", "create", "demo"),
                 ("task", "publish", "--project", "demo", "--task", "hello", "--shell", "true")):
        assert run(*argv).code == 0
    return run


def publish(cli: Cli, trigger: str, *args: str) -> Result:
    return cli("trigger", "publish", "--project", "demo", "--trigger", trigger, "--task", "hello",
               *args)


@pytest.mark.parametrize(("args", "needles"), [
    (("--every", "90s", "--cron", "* * * * *"), ["--cron and --every exclude each other"]),
    (("--at", "2h", "--every", "90s"), ["--every and --at exclude each other"]),
    (("--anchor", "2026-12-01T00:00:00Z",), ["--anchor applies to --every"]),
    (("--every", "1500ms"), ["--every", "whole number of seconds"]),
    (("--every", "400d"), ["--every", "from 1s to 366d"]),
    (("--every", "0s"), ["--every", "from 1s to 366d"]),
    (("--every", "soon"), ["--every", "not a duration"]),
    (("--every", "90s", "--anchor", "2026-12-01T00:00:00"), ["--anchor", "needs a UTC offset"]),
    (("--every", "90s", "--anchor", "2026-12-01T00:00:00.250Z"), ["--anchor", "whole second"]),
    (("--at", "2020-01-01T00:00:00Z"), ["--at", "in the past"]),
    (("--at", "next friday"), ["--at", "not an RFC 3339 time"]),
    (("--timezone", "UTC"), ["a new trigger needs a schedule", "--every", "--at"]),
    (("--cron", "0 * * * *"), ["--timezone", "is required"]),
])
def test_bad_schedules_are_one_line_errors(cli: Cli, args: tuple[str, ...],
                                           needles: list[str]) -> None:
    assert_one_line_error(publish(cli, "bad", *args), 2, *needles)
    listed = json.loads(cli("trigger", "list", "--json").out)
    assert listed == []  # nothing was written


def test_publish_list_and_republish_each_kind(cli: Cli) -> None:
    beat = publish(cli, "beat", "--every", "1h30m", "--anchor", "2026-01-01T00:15:00+08:00")
    assert beat.code == 0, beat.err
    assert "every 1h30m from 2025-12-31T16:15:00Z in UTC" in beat.out
    launch = publish(cli, "launch", "--at", "3h", "--timezone", "Asia/Shanghai", "--json")
    assert launch.code == 0, launch.err
    shown = json.loads(launch.out)
    assert (shown["kind"], shown["cron"], shown["timezone"]) == ("once", None, "Asia/Shanghai")
    assert shown["schedule"] == f"at {instant_text(shown['at_ms'])}"
    nightly = publish(cli, "nightly", "--cron", "0 3 * * *", "--timezone", "Europe/Berlin")
    assert nightly.code == 0, nightly.err
    table = cli("trigger", "list", "--project", "demo").out.splitlines()
    assert table[0].split()[:4] == ["TRIGGER", "REV", "TASK", "SCHEDULE"]
    assert "every 1h30m from 2025-12-31T16:15:00Z" in table[1]
    assert "0 3 * * *" in table[3] and "Europe/Berlin" in table[3]
    # the same interval again is a no-op; a new interval keeps the anchor
    again = publish(cli, "beat", "--every", "90m")
    assert again.code == 0 and "unchanged at revision 1" in again.out
    moved = json.loads(publish(cli, "beat", "--every", "1h", "--json").out)
    assert (moved["revision"], moved["every_s"], moved["anchor"]) == (
        2, 3600, "2025-12-31T16:15:00.000Z")
    # one kind to another
    swapped = json.loads(publish(cli, "nightly", "--every", "1d", "--anchor", "2026-01-01T02:00:00Z",
                                 "--json").out)
    assert (swapped["kind"], swapped["timezone"], swapped["cron"]) == ("interval", "Europe/Berlin",
                                                                      None)


def test_preview_of_every_kind(ql: Cli) -> None:  # noqa: F811
    interval = json.loads(ql("trigger", "preview", "--every", "1h", "--anchor",
                              "2026-03-08T05:30:00Z", "--timezone", "America/New_York",
                              "--after", "2026-03-08T05:00:00Z", "--count", "4", "--json").out)
    assert interval["kind"] == "interval" and interval["schedule"].startswith("every 1h from")
    assert [r["local"][11:16] for r in interval["occurrences"]] == ["00:30", "01:30", "03:30",
                                                                    "04:30"]
    assert [r["dst"] for r in interval["occurrences"]] == [None] * 4
    assert interval["occurrences"][2]["note"] == "UTC offset changed since the previous occurrence"
    once = ql("trigger", "preview", "--at", "2026-12-24T18:00:00+08:00", "--timezone",
               "Asia/Shanghai", "--after", "2026-12-01T00:00:00Z")
    assert once.code == 0, once.err
    assert "at 2026-12-24T10:00:00Z in Asia/Shanghai" in once.out
    assert "2026-12-24T18:00:00+08:00" in once.out
    after = ql("trigger", "preview", "--at", "2026-12-24T18:00:00+08:00", "--after",
                "2026-12-25T00:00:00Z")
    assert after.code == 0 and "no occurrence after 2026-12-25T00:00:00.000Z" in after.out
    default_anchor = json.loads(ql("trigger", "preview", "--every", "40s", "--after",
                                    "2026-12-01T00:00:00.300Z", "--count", "2", "--json").out)
    assert [r["utc"] for r in default_anchor["occurrences"]] == [
        "2026-12-01T00:00:01.000Z", "2026-12-01T00:00:41.000Z"]
    assert_one_line_error(ql("trigger", "preview"), 2, "give a schedule")
    assert_one_line_error(ql("trigger", "preview", "--cron", "* * * * *"), 2, "--timezone")


# --- real schedulers ----------------------------------------------------------------------


def stop(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=30)


def runs(q: Ql, trigger: str) -> list[int]:
    return sorted(r["scheduled_for_ms"] for r in q.json("run", "list", "--trigger", trigger,
                                                        "--limit", "1000"))


def publish_both(q: Ql) -> tuple[int, int]:
    """An interval every second, and a one-shot trigger 4 s from now: (at, anchor)."""
    beat = q.json("trigger", "publish", "--project", "demo", "--trigger", "beat", "--task",
                  "hello", "--every", "1s")
    launch = q.json("trigger", "publish", "--project", "demo", "--trigger", "launch", "--task",
                    "hello", "--at", "4s", "--timezone", "Asia/Shanghai")
    return int(launch["at_ms"]), int(beat["anchor_ms"])


def judge(q: Ql, at_ms: int, anchor_ms: int) -> None:
    assert runs(q, "launch") == [at_ms]
    beats = runs(q, "beat")
    assert beats[:3] == [anchor_ms, anchor_ms + 1000, anchor_ms + 2000]
    assert all(b - anchor_ms == 1000 * i for i, b in enumerate(beats))
    listed = {t["trigger"]: t for t in q.json("trigger", "list", "--project", "demo", "--next", "3")}
    assert (listed["launch"]["state"], listed["launch"]["next_fire_at"]) == ("done", [])
    assert listed["beat"]["state"] == "firing" and len(listed["beat"]["next_fire_at"]) == 3
    assert "done" in q.run("trigger", "list", "--project", "demo").stdout.splitlines()[2]
    ledger = q.json("trigger", "ledger", "--project", "demo", "--trigger", "launch", "--from",
                    "1h")
    assert [(o["at_ms"], o["fate"]) for o in ledger["occurrences"]] == [(at_ms, "ran")]
    report = q.json("audit", "--settle", "2s")
    assert report["ok"], report
    by_trigger = {t["trigger"]: t for t in report["triggers"]}
    assert by_trigger["launch"]["expected"] == 1
    assert by_trigger["beat"]["expected"] >= 3


@pytest.mark.slow
def test_serve_runs_an_interval_on_its_grid_and_a_one_shot_once(tmp_path: Path) -> None:
    q = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path)
    q.run("db", "migrate")
    q.run("project", "create", "demo")
    q.run("task", "publish", "--project", "demo", "--task", "hello", "--shell", "true")
    at_ms, anchor_ms = publish_both(q)
    server = q.start("serve", "--interval", "250ms")
    try:
        # the one-shot trigger stays done while the beats go on, 3 s past it: its run is older
        # than the audit's 2 s settle when the server stops
        wait_for(lambda: runs(q, "launch")
                 and max(runs(q, "beat"), default=0) >= at_ms + 3_000,
                 30, "the one-shot run and beats 3 s past it")
    finally:
        assert stop(server) == 0
    judge(q, at_ms, anchor_ms)


@pytest.mark.slow
def test_a_control_replica_runs_them_the_same_way(pg_db: PgTestDatabase,
                                                  tmp_path: Path) -> None:
    admin, runtime = pg_db.url("ql_admin"), pg_db.url("ql_runtime")
    q = Ql(admin, cwd=tmp_path)
    q.run("project", "create", "demo")
    q.run("task", "publish", "--project", "demo", "--task", "hello", "--argv", "/bin/true")
    at_ms, anchor_ms = publish_both(q)
    reader = Ql(runtime, cwd=tmp_path)
    replica = Replica("r1", runtime, tmp_path, lease_ms=5_000)
    replica.start()
    try:
        replica.wait_ready()
        # beats 3 s past the one-shot run: it is older than the audit settle at the stop
        wait_for(lambda: runs(reader, "launch")
                 and max(runs(reader, "beat"), default=0) >= at_ms + 3_000,
                 30, "the one-shot run and beats 3 s past it")
    finally:
        assert replica.stop() == 0
    reader_list = reader.json("trigger", "list", "--project", "demo")
    assert {t["trigger"]: t["state"] for t in reader_list} == {"beat": "firing", "launch": "done"}
    judge(reader, at_ms, anchor_ms)
    assert sum(1 for e in replica.events() if e.get("event") == "admitted") == len(
        runs(reader, "beat")) + 1


# --- the DST policy of a cron trigger -----------------------------------------------------


def test_publish_and_list_a_dst_policy(cli: Cli) -> None:
    made = publish(cli, "nightly", "--cron", "30 2 * * *", "--timezone", "America/New_York",
                   "--dst-gap", "skip")
    assert made.code == 0, made.err
    assert "30 2 * * * (DST gap skip, overlap first) in America/New_York" in made.out
    changed = json.loads(publish(cli, "nightly", "--dst-overlap", "both", "--json").out)
    assert changed["dst"] == {"gap": "skip", "overlap": "both"} and changed["revision"] == 2
    again = publish(cli, "nightly", "--dst-overlap", "both")
    assert "unchanged at revision 2" in again.out
    table = cli("trigger", "list").out
    assert "30 2 * * * (DST gap skip, overlap both)" in table
    plain = json.loads(publish(cli, "plain", "--cron", "0 3 * * *", "--timezone", "UTC",
                               "--json").out)
    assert plain["dst"] == {"gap": "shift", "overlap": "first"}


@pytest.mark.parametrize(("args", "needles"), [
    (("--cron", "*/5 * * * *", "--timezone", "UTC", "--dst-gap", "skip"),
     ["--dst-gap", "wall-clock"]),
    (("--cron", "0 * * * *", "--timezone", "UTC", "--dst-overlap", "both"),
     ["--dst-overlap", "wall-clock"]),
    (("--every", "1h", "--dst-gap", "skip"), ["--dst-gap", "applies to --cron"]),
    (("--at", "2h", "--dst-overlap", "second"), ["--dst-overlap", "applies to --cron"]),
    (("--cron", "30 2 * * *", "--timezone", "UTC", "--dst-gap", "later"), ["--dst-gap"]),
])
def test_a_policy_where_it_cannot_apply_is_refused(cli: Cli, args: tuple[str, ...],
                                                   needles: list[str]) -> None:
    assert_one_line_error(publish(cli, "bad", *args), 2, *needles)


def test_a_policy_on_an_existing_interval_trigger_names_the_option(cli: Cli) -> None:
    assert publish(cli, "beat", "--every", "1h").code == 0
    assert_one_line_error(cli("trigger", "publish", "--project", "demo", "--trigger", "beat",
                              "--dst-gap", "skip"), 2, "--dst-gap", "only to cron triggers")
    assert publish(cli, "hourly", "--cron", "0 * * * *", "--timezone", "UTC").code == 0
    assert_one_line_error(cli("trigger", "publish", "--project", "demo", "--trigger", "hourly",
                              "--dst-overlap", "both"), 2, "--dst-overlap", "wall-clock")


def test_preview_shows_what_the_policy_does(ql: Cli) -> None:  # noqa: F811
    def preview(*args: str) -> Any:
        done = ql("trigger", "preview", "--timezone", "America/New_York", "--json", *args)
        assert done.code == 0, done.err
        return json.loads(done.out)

    skip = preview("--cron", "30 2 * * *", "--dst-gap", "skip", "--after",
                   "2026-03-07T12:00:00Z", "--count", "2")
    assert skip["dst"] == {"gap": "skip", "overlap": "first"}
    [sunday_gone, _after] = skip["occurrences"]
    assert sunday_gone["utc"] == "2026-03-09T06:30:00.000Z"
    assert sunday_gone["skipped"] == ["2026-03-08T02:30:00"]
    assert "2026-03-08 02:30:00 does not exist, skipped" in sunday_gone["note"]
    shift = preview("--cron", "30 2 * * *", "--after", "2026-03-07T12:00:00Z", "--count", "1")
    assert [(o["utc"], o["dst"]) for o in shift["occurrences"]] == [
        ("2026-03-08T07:00:00.000Z", "gap-shifted")]
    both = preview("--cron", "30 1 * * *", "--dst-overlap", "both", "--after",
                   "2026-10-31T12:00:00Z", "--count", "3")
    assert [(o["local"], o["dst"]) for o in both["occurrences"]] == [
        ("2026-11-01T01:30:00-04:00", "overlap-first"),
        ("2026-11-01T01:30:00-05:00", "overlap-second"),
        ("2026-11-02T01:30:00-05:00", None)]
    table = ql("trigger", "preview", "--timezone", "America/New_York", "--cron", "30 1 * * *",
               "--dst-overlap", "second", "--after", "2026-10-31T12:00:00Z", "--count", "1").out
    assert "30 1 * * * in America/New_York (DST gap shift, overlap second)" in table
    assert "DST overlap: second of two identical wall times" in table


# --- bounded jitter -----------------------------------------------------------------------


def test_publish_list_and_preview_a_jitter(cli: Cli, ql: Cli) -> None:  # noqa: F811
    made = publish(cli, "nightly", "--cron", "0 3 * * *", "--timezone", "Europe/Berlin",
                   "--jitter", "10m", "--jitter-random", "1m", "--json")
    assert made.code == 0, made.err
    shown = json.loads(made.out)
    stable = shown["jitter"]["stable_s"]
    assert shown["jitter"] == {"max_s": 600, "random_s": 60, "stable_s": stable}
    assert 0 <= stable <= 540
    [listed] = json.loads(cli("trigger", "list", "--json", "--next", "3").out)
    pairs = list(zip(listed["next_fire_at_ms"], listed["next_due_at_ms"], strict=True))
    assert len(pairs) == 3
    assert all(nominal + stable * 1000 <= due <= nominal + 600_000 for nominal, due in pairs)
    table = cli("trigger", "list", "--next", "1").out
    assert "0 3 * * * (jitter 10m, 1m random)" in table
    offset = (pairs[0][1] - pairs[0][0]) // 1000
    assert f"(02:00:00Z) +{offset // 60}m{offset % 60}s" in table or \
        f"(02:00:00Z) +{offset}s" in table or f"(02:00:00Z) +{offset // 60}m" in table
    # preview the same trigger: the same jittered instants
    preview = json.loads(ql("trigger", "preview", "--cron", "0 3 * * *", "--timezone",
                            "Europe/Berlin", "--jitter", "10m", "--jitter-random", "1m",
                            "--project", "demo", "--trigger", "nightly", "--count", "3",
                            "--after", instant_text(pairs[0][0] - 1000), "--json").out)
    assert [(r["at_ms"], r["jittered_at_ms"]) for r in preview["occurrences"]] == pairs
    assert preview["jitter"] == shown["jitter"]  # the same view as the trigger's own
    removed = json.loads(publish(cli, "nightly", "--jitter", "0s", "--json").out)
    assert removed["jitter"] is None and removed["revision"] == 2


@pytest.mark.parametrize(("args", "needles"), [
    (("--every", "1h", "--jitter", "2h"), ["--jitter", "from 1s to 1h"]),
    (("--every", "1h", "--jitter", "1m", "--jitter-random", "2m"), ["--jitter-random", "1m"]),
    (("--every", "1h", "--jitter", "1500ms"), ["--jitter", "whole number of seconds"]),
    (("--every", "1h", "--jitter-random", "1m"), ["--jitter-random", "needs a jitter"]),
])
def test_bad_jitters_are_one_line_errors(cli: Cli, args: tuple[str, ...],
                                         needles: list[str]) -> None:
    assert_one_line_error(publish(cli, "bad", *args), 2, *needles)


def test_preview_of_a_jitter_needs_the_trigger(ql: Cli) -> None:  # noqa: F811
    assert_one_line_error(ql("trigger", "preview", "--every", "1h", "--jitter", "5m"), 2,
                          "--project and --trigger")
    assert_one_line_error(ql("trigger", "preview", "--every", "1h", "--jitter-random", "5m",
                             "--project", "p", "--trigger", "t"), 2, "--jitter-random")
