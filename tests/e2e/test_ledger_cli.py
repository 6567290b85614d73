"""`ql trigger ledger` against a database a real `ql serve` scheduled (SQLite): every
occurrence it admitted is `ran` with its Run, what fell due after it stopped is `due`, the
next ones are `pending`, a manual Run is no occurrence, and bad windows are clear errors."""

from __future__ import annotations

import re
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.support.ql import Ql, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def ql(tmp_path: Path) -> Ql:
    q = Ql(f"sqlite:///{tmp_path / 'ql.db'}", cwd=tmp_path)
    q.run("db", "migrate")
    q.run("project", "create", "demo")
    q.run("task", "publish", "--project", "demo", "--task", "hello", "--shell", "true")
    q.run("trigger", "publish", "--project", "demo", "--trigger", "t1", "--task", "hello",
          "--cron", "* * * * * *", "--timezone", "Asia/Shanghai")
    return q


def cron_runs(ql: Ql) -> dict[int, str]:
    return {r["scheduled_for_ms"]: r["id"] for r in ql.json("run", "list", "--limit", "1000")
            if r["trigger_type"] == "cron"}


def test_the_ledger_of_a_trigger_ql_serve_ran(ql: Ql) -> None:
    [published] = ql.json("trigger", "list", "--project", "demo")
    since = published["published_at_ms"]
    server = ql.start("serve", "--interval", "250ms")
    try:
        wait_for(lambda: len(cron_runs(ql)) >= 3, 30, "three scheduled Runs")
        fired = ql.json("trigger", "fire", "--project", "demo", "--trigger", "t1")
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    ran = cron_runs(ql)

    def ledger_with_a_due_occurrence() -> Any:
        view = ql.json("trigger", "ledger", "--project", "demo", "--trigger", "t1",
                       "--from", str(since))
        return view if any(o["fate"] == "due" for o in view["occurrences"]) else None

    # at least one occurrence falls due with no scheduler running
    view = wait_for(ledger_with_a_due_occurrence, 30, "an occurrence due since the stop",
                    interval=0.2)
    occurrences = view["occurrences"]
    assert [o["at_ms"] for o in occurrences] == sorted((o["at_ms"] for o in occurrences),
                                                       reverse=True)
    assert view["not_shown"] == 0 and view["project"] == "demo" and view["trigger"] == "t1"
    fates = {o["at_ms"]: o["fate"] for o in occurrences}
    # every occurrence since the publish was admitted while ql serve ran ...
    assert {at for at, fate in fates.items() if fate == "ran"} == set(ran)
    for o in occurrences:
        if o["fate"] == "ran":
            assert o["runs"] == [{"id": ran[o["at_ms"]], "status": o["runs"][0]["status"],
                                  "type": "cron"}]
            assert o["local"].endswith("+08:00")
    # ... the rest is not decided yet: due since the stop, then the next three pending
    rest = [o for o in reversed(occurrences) if o["fate"] != "ran"]
    assert [o["fate"] for o in rest][-3:] == ["pending"] * 3
    assert rest[0]["fate"] == "due" and rest[0]["at_ms"] > max(ran)
    assert {o["fate"] for o in rest} == {"due", "pending"}
    assert all(fired["id"] not in [r["id"] for r in o["runs"]] for o in occurrences)

    table = ql.run("trigger", "ledger", "--project", "demo", "--trigger", "t1",
                   "--from", str(since), "--limit", "4").stdout.splitlines()
    assert table[1].split() == ["TIME", "FATE", "RUN", "STATUS"]
    assert [line.split()[3] for line in table[2:6]] == ["pending"] * 3 + ["due"]
    assert table[2].split()[1].endswith("+08:00") and table[2].split()[2].endswith("Z)")
    left_out = re.fullmatch(r"(\d+) earlier occurrence\(s\) in the window not shown .*", table[-1])
    assert left_out and int(left_out.group(1)) >= len(occurrences) - 4  # time went on
    assert re.fullmatch(r"\d+ occurrence\(s\): (\d+ \w+(, )?)+", table[-2])
    first_run = min(ran)
    oldest = ql.run("trigger", "ledger", "--project", "demo", "--trigger", "t1",
                    "--from", str(first_run), "--to", str(first_run)).stdout
    assert "ran" in oldest and ran[first_run][:13] in oldest


def test_bad_ledger_requests_are_clear_errors(ql: Ql) -> None:
    for args, text in [
        (["--trigger", "nope"], "nope"),
        (["--trigger", "t1", "--from", "1m", "--to", "2m"], "--from: must not be after --to"),
        (["--trigger", "t1", "--limit", "0"], "--limit"),
        (["--trigger", "t1", "--from", "yesterday"], "not an RFC 3339 time"),
    ]:
        result = ql.run("trigger", "ledger", "--project", "demo", *args, check=False)
        assert result.returncode == 2 and text in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
