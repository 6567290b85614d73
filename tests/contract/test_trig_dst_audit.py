"""The audit and the ledger judge a cron trigger by its DST policy: the revision records
carry the spec's config on every database,
and over New York's 2027 DST nights (the standalone scheduler under a fake clock) `ql audit`
finds every occurrence the policy asks for and nothing else, and the ledger lists them."""

from __future__ import annotations

from datetime import UTC, datetime

from qinglong.audit.model import AuditParams
from qinglong.audit.source import read_input
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.profiles.audit_backend import run_audit
from qinglong.service.ledger import TriggerLedger
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPublishParams,
)
from qinglong.testing import FakeClock
from tests.conftest import SqliteStores
from tests.contract.conftest import Backend
from tests.scheduler.test_trig_dst_coordinator import stores as dst_stores  # noqa: F401
from tests.scheduler.test_trig_dst_coordinator import walk

NY = "America/New_York"


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def iso(at_ms: int) -> str:
    return datetime.fromtimestamp(at_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_revision_records_carry_the_config_on_every_database(backend: Backend) -> None:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="hello", name="hello",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    d.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="nightly", task_id="hello", expression="30 2 * * *",
        timezone=NY, dst_gap="skip", dst_overlap="both"))
    d.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="plain", task_id="hello", expression="30 2 * * *",
        timezone=NY))
    now = backend.now_ms()
    data = backend.database("ql_runtime", "trig-test").read(
        "audit", lambda tx: read_input(tx, now_ms=now, from_ms=0, to_ms=2**62), snapshot=True)
    configs = {r.trigger_id: dict(r.config) for r in data.revisions}
    assert configs["nightly"]["dst"] == {"gap": "skip", "overlap": "both"}
    assert "dst" not in configs["plain"] and configs["plain"]["expression"] == "30 2 * * *"


def test_the_audit_and_the_ledger_follow_the_policy(dst_stores: SqliteStores,  # noqa: F811
                                                    clock: FakeClock) -> None:
    stores = dst_stores
    walk(stores, clock, "2027-03-15T12:00:00Z")
    clock.set(ms("2027-11-06T12:00:00Z"))
    walk(stores, clock, "2027-11-08T12:00:00Z")
    url = f"sqlite:///{stores.path}"
    for start, end in (("2027-03-13T12:00:00Z", "2027-03-15T11:00:00Z"),
                       ("2027-11-06T13:00:00Z", "2027-11-08T11:00:00Z")):
        report = run_audit(url, clock, AuditParams(start_ms=ms(start), end_ms=ms(end),
                                                   settle_ms=0, project_id="demo"))
        by = {t.trigger_id: t for t in report.triggers}
        for name in ("shift", "skip", "first", "second", "both", "half-hourly"):
            assert by[name].violations == 0, by[name]
            assert by[name].expected == by[name].admitted, by[name]
    ledger = TriggerLedger(stores.runs)
    skip = ledger.ledger("demo", "skip", now_ms=clock.now_ms(), from_ms=ms("2027-03-13T12:00:00Z"),
                         to_ms=ms("2027-03-15T12:00:00Z"))
    assert [(o.at[:19], o.fate) for o in skip.occurrences] == [
        ("2027-03-15T06:30:00", "ran")]
    both = ledger.ledger("demo", "both", now_ms=clock.now_ms(), from_ms=ms("2027-11-06T12:00:00Z"),
                         to_ms=ms("2027-11-08T12:00:00Z"))
    assert sorted((o.at[:19], o.fate) for o in both.occurrences) == [
        ("2027-11-07T05:30:00", "ran"), ("2027-11-07T06:30:00", "ran"),
        ("2027-11-08T06:30:00", "ran")]
