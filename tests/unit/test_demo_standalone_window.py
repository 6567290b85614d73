"""`make demo-standalone` judges only the window in which every trigger was published.

Its triggers are published one `ql trigger publish` process after another, a second or so
apart, and each starts at its first occurrence at or after its own publish. A summary that
starts counting before the last publish reports the occurrences a later trigger could never
have had as gaps, or the Runs an earlier trigger rightly had as spurious (issue 18, item 5).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from qinglong.domain.cron import CronSchedule

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "demo_standalone.py"
T0 = 1_796_000_000_000  # a whole second


def load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_standalone", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scheduled(demo: ModuleType, published: dict[str, int], stopped_ms: int) -> list[dict[str, object]]:
    """The Runs a correct scheduler admits: every occurrence of each trigger from its own
    publish until the stop, once, each executed."""
    runs: list[dict[str, object]] = []
    for trigger_id, _task, cron, zone in demo.TRIGGERS:
        schedule = CronSchedule.parse(cron, zone)
        at = schedule.first_at_or_after(published[trigger_id])
        while at < stopped_ms:
            runs.append({"trigger": trigger_id, "scheduled_for_ms": at, "status": "succeeded"})
            at = schedule.next_after(at)
    return runs


@pytest.fixture
def demo() -> ModuleType:
    return load_demo()


def staggered(demo: ModuleType) -> dict[str, int]:
    """Publish times 0.7 s apart, as three `ql` processes in a row give them."""
    return {trigger_id: T0 + 300 + 700 * i for i, (trigger_id, *_rest) in enumerate(demo.TRIGGERS)}


def test_triggers_published_one_after_another_are_judged_from_the_last_publish(
        demo: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    published = staggered(demo)
    stopped = T0 + 20_000
    runs = scheduled(demo, published, stopped)
    # the first trigger rightly has Runs before the last one was published
    assert min(int(str(r["scheduled_for_ms"])) for r in runs) < max(published.values())
    assert demo.summarize(runs, max(published.values()), stopped) == 0
    out = capsys.readouterr().out
    assert "result: OK, every occurrence admitted exactly once" in out


def test_a_real_gap_or_duplicate_in_the_window_is_still_reported(
        demo: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    published = staggered(demo)
    stopped = T0 + 20_000
    runs = scheduled(demo, published, stopped)
    window_start = max(published.values())
    in_window = [r for r in runs if r["trigger"] == "every-second"
                 and window_start <= int(str(r["scheduled_for_ms"])) <= stopped - 1000]
    gap = [r for r in runs if r is not in_window[3]]
    assert demo.summarize(gap, window_start, stopped) == 1
    assert "result: 1 problem(s)" in capsys.readouterr().out
    duplicate = [*runs, dict(in_window[5])]
    assert demo.summarize(duplicate, window_start, stopped) == 1


def test_the_window_starts_at_the_latest_publish_the_database_recorded(
        demo: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    published = staggered(demo)
    listed = [{"project": "demo", "trigger": t, "published_at_ms": ms} for t, ms in published.items()]

    def fake_ql(db_url: str, *args: str, capture: bool = False) -> str:
        assert args[:2] == ("trigger", "list") and "--json" in args and capture
        return json.dumps(listed)

    monkeypatch.setattr(demo, "ql", fake_ql)
    assert demo.all_published_ms("sqlite:///x.db") == T0 + 300 + 700 * 2
    monkeypatch.setattr(demo, "TRIGGERS", [*demo.TRIGGERS, ("late", "x", "* * * * * *", "UTC")])
    with pytest.raises(SystemExit, match="late"):
        demo.all_published_ms("sqlite:///x.db")

