"""The batched admission (ScheduleStore.schedule_commit_batch): many claimed rows in one
transaction (SERIALIZABLE on PostgreSQL, where one set-based statement writes them all;
``BEGIN IMMEDIATE`` on SQLite, row by row), each with its own fence and facts re-verified at
commit.

On every database: a row whose fence or facts fail is left out and reported raced (the rest
commit); a failing row fails alone; admissions, misfire skips, pause records,
initialisations and ineligible rows are written exactly as the single-row commit
(``schedule_commit``, a batch of one) writes them. Where several processes serve the
database (PostgreSQL): claims another replica took over are raced; a serialization failure
provoked by a concurrent transaction, or a row locked past the lock timeout, makes the batch
fall back to halves; a COMMIT whose reply is lost is resolved row by row from durable facts.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from qinglong.domain.admission import AdmissionIds
from qinglong.domain.decision import PAUSED_FATE, Disposition
from qinglong.domain.schedule import ScheduleClaim
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import Conflict, OutcomeUnknown, QinglongError
from qinglong.scheduler.coordinator import Coordinator
from qinglong.storage.admission import ScheduleStore
from qinglong.storage.admission.params import ClaimCommitParams, CommitResult, ScheduleClaimParams
from qinglong.storage.definitions.params import (
    ProjectCreateParams,
    TaskPublishParams,
    TriggerPauseParams,
    TriggerPublishParams,
)
from tests.contract.conftest import Backend, PgBackend
from tests.contract.test_manual_runs import wait_for
from tests.support.held_commits import HeldCommits

YEARLY = "0 0 0 1 1 *"
GRACE = 30_000
Outcome = CommitResult | QinglongError


@dataclass
class Bed:
    pg: Backend  # (named for the PostgreSQL cases; any database where it is a Backend)

    def sql(self, statement: str, *params: object) -> list[dict[str, Any]]:
        """As the database owner, ``?`` placeholders on every database."""
        return [dict(r) for r in self.pg.sql(statement, *params)]

    def publish(self, trigger: str, *, project: str = "demo", misfire: str = "skip",
                cron: str = YEARLY) -> None:
        self.pg.definitions.trigger_publish(TriggerPublishParams(
            project_id=project, trigger_id=trigger, task_id="hello", expression=cron,
            timezone="UTC", misfire_policy=misfire))

    def due(self, trigger: str, at_ms: int, *, project: str = "demo") -> None:
        self.pg.set_cursor(project, trigger, at_ms)

    def second_ago(self) -> int:
        return self.pg.now_ms() // 1000 * 1000 - 1000

    def store(self, name: str, **kw: Any) -> ScheduleStore:
        return self.pg.schedule_store(name, **kw)

    def claim(self, store: ScheduleStore, owner: str, limit: int,
              lease_ms: int = 30_000) -> list[ScheduleClaim]:
        claims = store.schedule_claim(ScheduleClaimParams(owner=owner, lease_ms=lease_ms,
                                                          limit=limit))
        assert all(isinstance(c, ScheduleClaim) for c in claims), claims
        return claims  # type: ignore[return-value]

    def runs(self, trigger: str | None = None) -> list[dict[str, Any]]:
        where = "" if trigger is None else "WHERE r.trigger_id = ?"
        return self.sql(
            "SELECT r.*, e.payload ->> 'claim_token' AS token, e.payload ->> 'claim_owner' AS owner, "
            "(SELECT count(*) FROM run_attempts a WHERE a.run_id = r.id) AS attempts, "
            "(SELECT count(*) FROM run_events v WHERE v.run_id = r.id) AS events "
            "FROM runs r LEFT JOIN run_events e ON e.run_id = r.id AND e.sequence = 1 "
            + where + " ORDER BY r.trigger_id, r.scheduled_for_ms",
            *([] if trigger is None else [trigger]))

    def schedule(self, trigger: str) -> dict[str, Any]:
        [row] = self.sql("SELECT * FROM trigger_schedules WHERE trigger_id = ?", trigger)
        return row


@dataclass
class SharedBed(Bed):
    pg: PgBackend


def payload(value: object) -> dict[str, Any]:
    """A stored JSON payload (jsonb comes back decoded, SQLite's JSON text does not)."""
    decoded = json.loads(value) if isinstance(value, str) else value
    assert isinstance(decoded, dict)
    return decoded


def decide(claims: list[ScheduleClaim], grace_ms: int = GRACE) -> list[ClaimCommitParams]:
    out = []
    for claim in claims:
        decision = claim.decide(grace_ms=grace_ms)
        ids = (AdmissionIds.new(lambda: str(uuid.uuid4()))
               if decision.disposition is Disposition.ADMIT else None)
        out.append(ClaimCommitParams(claim=claim, decision=decision, ids=ids))
    return out


def by_trigger(params: list[ClaimCommitParams], outcomes: list[Outcome]) -> dict[str, Outcome]:
    return {p.claim.candidate.trigger_id: o for p, o in zip(params, outcomes, strict=True)}


def outcome_of(o: Outcome) -> str:
    if isinstance(o, QinglongError):
        return f"error:{o.code}"
    return o.outcome.value if o.reason is None else f"{o.outcome.value}:{o.reason}"


def _bed(backend: Backend) -> Bed:
    d = backend.definitions
    for project in ("demo", "other"):
        d.project_create(ProjectCreateParams(project_id=project))
        d.task_publish(TaskPublishParams(project_id=project, task_id="hello", name="hello",
                                         spec=CommandSpec(command=ShellCommand(command="true"))))
    return Bed(backend)


@pytest.fixture
def bed(backend: Backend) -> Bed:
    """On every database."""
    return _bed(backend)


@pytest.fixture
def shared(pg_backend: PgBackend) -> SharedBed:
    """On a database several replicas serve at once (PostgreSQL)."""
    _bed(pg_backend)
    return SharedBed(pg_backend)


def test_a_batch_admits_each_row_under_its_own_fence_in_one_transaction(bed: Bed) -> None:
    triggers = [f"t{i}" for i in range(6)]
    at = bed.second_ago()
    for t in triggers:
        bed.publish(t)
        bed.due(t, at)
    store = bed.store("r1")
    params = decide(bed.claim(store, "r1", 6))
    assert [p.decision.disposition for p in params] == [Disposition.ADMIT] * 6
    outcomes = store.schedule_commit_batch(params)
    assert [outcome_of(o) for o in outcomes] == ["admitted"] * 6
    runs = bed.runs()
    assert [(r["trigger_id"], r["scheduled_for_ms"], r["attempts"], r["events"]) for r in runs] == [
        (t, at, 1, 2) for t in triggers]
    for p, o, run in zip(params, outcomes, runs, strict=True):
        assert isinstance(o, CommitResult) and o.run_id == run["id"] and not o.in_doubt
        assert (run["token"], run["owner"]) == (p.claim.fence.token, "r1")  # its own fence
        row = bed.schedule(p.claim.candidate.trigger_id)
        # no claim left on the row (SQLite's rows hold none: its claims write nothing)
        assert row.get("claim_token") is None and row["last_scheduled_at_ms"] == at
        assert row["state_version"] == p.claim.candidate.state_version + 1
        assert row["next_fire_at_ms"] > at
    assert len({r["created_at_ms"] for r in runs}) == 1  # one transaction, one clock reading


def _normal(row: dict[str, Any], trigger: str) -> dict[str, Any]:
    """A row with its ids and instants dropped and its trigger's name made neutral."""
    skip = {"id", "run_id", "attempt_id", "created_at_ms", "queued_at_ms", "decided_at_ms",
            "claim_token", "token", "updated_at_ms", "claim_expires_at_ms"}
    return {k: (str(v).replace(trigger, "T") if isinstance(v, str) else v)
            for k, v in row.items() if k not in skip}


def test_mixed_dispositions_write_what_the_single_row_commit_writes(bed: Bed) -> None:
    """Twin triggers a<n> and b<n> in the same state: the a's are committed as one batch,
    the b's one by one; every result, cursor, Run and misfire record must be the same."""
    now = bed.second_ago()
    cases = {  # suffix: (misfire policy, cursor, pause window, project)
        "admit": ("skip", now, None, "demo"),
        "late-skip": ("skip", now - 120_000, None, "demo"),
        "late-fire": ("fire_once", now - 120_000, None, "demo"),
        "resumed": ("skip", now - 5_000, (now - 6_000, now - 2_500), "demo"),
        "fresh": ("skip", None, None, "demo"),
        "archived": ("skip", now, None, "other"),
    }
    for twin in ("a", "b"):
        for suffix, (misfire, cursor, paused, project) in cases.items():
            trigger = f"{twin}-{suffix}"
            bed.publish(trigger, project=project, misfire=misfire,
                        cron="* * * * * *" if paused else YEARLY)
            if cursor is not None:
                bed.due(trigger, cursor, project=project)
            if paused is not None:
                bed.sql("UPDATE trigger_schedules SET paused_from_ms = ?, paused_until_ms = ? "
                        "WHERE trigger_id = ?", paused[0], paused[1], trigger)
    store = bed.store("r1")
    claims = bed.claim(store, "r1", 2 * len(cases))
    assert len(claims) == 2 * len(cases)
    bed.pg.definitions.project_archive("other")  # the 'archived' twins can no longer fire
    params = decide(claims)
    twins = {twin: [p for p in params if p.claim.candidate.trigger_id.startswith(twin)]
             for twin in ("a", "b")}
    batch = by_trigger(twins["a"], store.schedule_commit_batch(twins["a"]))
    single = {p.claim.candidate.trigger_id: store.schedule_commit(p) for p in twins["b"]}
    expected = {"admit": "admitted", "late-skip": "advanced", "late-fire": "admitted",
                "resumed": "admitted", "fresh": "advanced", "archived": "raced:claim_superseded"}
    for suffix, outcome in expected.items():
        a, b = f"a-{suffix}", f"b-{suffix}"
        assert outcome_of(batch[a]) == outcome_of(single[b]) == outcome, suffix
        assert _normal(bed.schedule(a), a) == _normal(bed.schedule(b), b), suffix
        assert [_normal(r, a) for r in bed.runs(a)] == [_normal(r, b) for r in bed.runs(b)], suffix
        misfires = "SELECT * FROM trigger_schedule_misfires WHERE trigger_id = ? ORDER BY due_at_ms"
        assert ([_normal(r, a) for r in bed.sql(misfires, a)]
                == [_normal(r, b) for r in bed.sql(misfires, b)]), suffix
    policies = {r["policy"] for r in bed.sql("SELECT policy FROM trigger_schedule_misfires")}
    assert policies == {"skip", "fire_once", PAUSED_FATE}
    created = bed.sql("SELECT e.payload FROM run_events e JOIN runs r ON r.id = e.run_id "
                      "WHERE e.sequence = 1 AND r.trigger_id IN ('a-late-fire', 'b-late-fire')")
    assert all(payload(row["payload"])["misfired"] for row in created) and len(created) == 2


def test_stolen_and_changed_rows_are_raced_and_the_rest_of_the_batch_commits(shared: SharedBed) -> None:
    """t0, t1: their claims expired and another replica took them over; t6: republished and
    t7: paused while the claim was held (the write statement's fence finds the row changed).
    Each is raced alone; the other rows of the batch are admitted under their own fences."""
    bed = shared
    at = bed.second_ago()
    for i in range(8):
        bed.publish(f"t{i}")
        bed.due(f"t{i}", at if i < 2 else at - 1_000)  # t2..t7 a second older: claimed first
    mine = bed.store("r1")
    # The lasting claims first, so the claim of t0, t1 (about to expire) is the last one:
    # taken first, it could expire before the second claim, which would take them again.
    long = bed.claim(mine, "r1", 6)  # t2..t7
    short = bed.claim(mine, "r1", 2, lease_ms=1_000)  # t0, t1
    assert [c.candidate.trigger_id for c in short] == ["t0", "t1"]
    bed.pg.pass_time(1_100)
    thief = bed.store("thief")
    stolen = bed.claim(thief, "thief", 8)  # only the expired claims can be taken
    assert sorted(c.candidate.trigger_id for c in stolen) == ["t0", "t1"]
    bed.pg.definitions.trigger_publish(TriggerPublishParams(
        project_id="demo", trigger_id="t6", expression="*/5 * * * * *"))
    bed.pg.definitions.trigger_pause(TriggerPauseParams(project_id="demo", trigger_id="t7",
                                                        actor="tester"))
    params = decide(short + long)
    got = by_trigger(params, mine.schedule_commit_batch(params))
    assert {t: outcome_of(o) for t, o in got.items()} == {
        "t0": "raced:claim_expired", "t1": "raced:claim_expired",
        "t2": "admitted", "t3": "admitted", "t4": "admitted", "t5": "admitted",
        "t6": "raced:claim_superseded", "t7": "raced:claim_superseded"}
    assert [outcome_of(o) for o in thief.schedule_commit_batch(decide(stolen))] == ["admitted"] * 2
    runs = bed.runs()
    assert [(r["trigger_id"], r["scheduled_for_ms"]) for r in runs] == [
        (f"t{i}", at if i < 2 else at - 1_000) for i in range(6)]
    owners = {r["trigger_id"]: r["owner"] for r in runs}
    assert owners == {"t0": "thief", "t1": "thief", "t2": "r1", "t3": "r1", "t4": "r1", "t5": "r1"}
    assert bed.schedule("t7")["paused_from_ms"] is not None  # the pause stands, untouched


def test_an_expired_fence_in_a_locked_row_is_raced_alone(bed: Bed) -> None:
    """Rows still at their claimed version but past their lease are raced in the batch
    itself (no one took them over), the others commit."""
    at = bed.second_ago()
    for i in range(4):
        bed.publish(f"t{i}")
        bed.due(f"t{i}", at if i < 2 else bed.pg.now_ms() + 3_600_000)  # t2, t3 not due yet
    store = bed.store("r1")
    # the expiring claim first, while only t0 and t1 are due
    expiring = bed.claim(store, "r1", 2, lease_ms=1_000)
    assert [c.candidate.trigger_id for c in expiring] == ["t0", "t1"]
    for trigger in ("t2", "t3"):
        bed.due(trigger, at - 1_000)  # a second older than t0, t1: a claim takes them first
    lasting = bed.claim(store, "r1", 2)
    assert [c.candidate.trigger_id for c in lasting] == ["t2", "t3"]
    before = bed.schedule("t0")
    bed.pg.pass_time(1_100)
    params = decide(expiring + lasting)
    got = by_trigger(params, store.schedule_commit_batch(params))
    assert {t: outcome_of(o) for t, o in got.items()} == {
        "t0": "raced:claim_expired", "t1": "raced:claim_expired",
        "t2": "admitted", "t3": "admitted"}
    assert bed.schedule("t0") == before  # nothing written for the expired ones
    assert before.get("claim_owner", "r1") == "r1"  # (where a claim is written: still r1's)


def test_a_failing_row_fails_alone_and_its_claim_is_left_to_expire(bed: Bed) -> None:
    at = bed.second_ago()
    for i in range(6):
        bed.publish(f"t{i}")
        bed.due(f"t{i}", at)
    bed.pg.refuse_writes("runs", "INSERT", "NEW.trigger_id = 't3'")
    retried: list[str] = []
    store = bed.store("r1", on_retry=retried.append)
    params = decide(bed.claim(store, "r1", 6))
    before = bed.schedule("t3")
    got = by_trigger(params, store.schedule_commit_batch(params))
    assert {t: outcome_of(o) for t, o in got.items() if t != "t3"} == dict.fromkeys(
        ["t0", "t1", "t2", "t4", "t5"], "admitted")
    failed = got["t3"]
    assert isinstance(failed, Conflict) and "refused" in failed.message
    code = bed.pg.kernel.error_code(failed)  # the database's own code for the refusal
    assert code is not None
    assert [r["trigger_id"] for r in bed.runs()] == ["t0", "t1", "t2", "t4", "t5"]
    assert bed.schedule("t3") == before  # nothing written for it; its claim stays until expiry
    assert set(retried) == {code}  # each split was heard as a retried attempt
    # Through the coordinator: every result is on record before the error ends the cycle.
    for i in range(6):
        bed.due(f"t{i}", at + 1_000)
    bed.pg.drop_claims()
    seen: list[str] = []
    coordinator = Coordinator(store, owner="r1", budget=64, batch=64, wake_hint=False,
                              on_committed=lambda c, _d, r: seen.append(
                                  f"{c.candidate.trigger_id}:{r.outcome.value}"))
    with pytest.raises(Conflict, match="refused"):
        coordinator.run_cycle()
    assert sorted(seen) == [f"t{i}:admitted" for i in (0, 1, 2, 4, 5)]


def test_a_serialization_failure_from_a_concurrent_transaction_splits_the_batch(shared: SharedBed) -> None:
    bed = shared
    at = bed.second_ago()
    for i in range(6):
        bed.publish(f"t{i}")
        bed.due(f"t{i}", at)
    commits: list[int] = []
    other = bed.pg.db.server.connect(bed.pg.db.name)

    def conflict() -> None:
        """Inside the batch, just before its COMMIT (the first time only): a concurrent
        SERIALIZABLE transaction reads a schedule row the batch wrote and writes the project
        row the batch read, and commits first: a dangerous structure, so the batch's COMMIT
        fails serialization."""
        commits.append(1)
        if len(commits) > 1:
            return
        with other.transaction():
            other.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            other.execute("SELECT * FROM qinglong.trigger_schedules WHERE trigger_id = 't0'")
            other.execute("UPDATE qinglong.projects SET name = name WHERE id = 'demo'")

    retried: list[str] = []
    store = bed.store("r1", before_commit=conflict, on_retry=retried.append)
    params = decide(bed.claim(store, "r1", 6))
    try:
        outcomes = store.schedule_commit_batch(params)
    finally:
        other.close()
    assert [outcome_of(o) for o in outcomes] == ["admitted"] * 6
    assert retried == ["40001"]
    assert len(commits) == 3  # the failed batch, then its two halves
    runs = bed.runs()
    assert [(r["trigger_id"], r["attempts"], r["events"]) for r in runs] == [
        (f"t{i}", 1, 2) for i in range(6)]
    assert len({r["created_at_ms"] for r in runs}) <= 2


def test_a_row_locked_past_the_lock_timeout_splits_the_batch_and_waits_no_longer(shared: SharedBed) -> None:
    """A row someone holds locked longer than lock_timeout (1 s) fails the batch with 55P03
    (nothing written); its halves are tried again, and the rows not held commit at once."""
    bed = shared
    at = bed.second_ago()
    for i in range(4):
        bed.publish(f"t{i}")
        bed.due(f"t{i}", at)
    holder = bed.pg.db.server.connect(bed.pg.db.name)
    retried: list[str] = []

    def split(state: str) -> None:
        """The batch failed and is split: the lock is released before the halves run."""
        retried.append(state)
        holder.rollback()

    store = bed.store("r1", on_retry=split)
    params = decide(bed.claim(store, "r1", 4))
    holder.execute("BEGIN")
    holder.execute("SELECT 1 FROM qinglong.trigger_schedules WHERE trigger_id = 't2' FOR UPDATE")
    try:
        outcomes = store.schedule_commit_batch(params)
    finally:
        holder.close()
    assert [outcome_of(o) for o in outcomes] == ["admitted"] * 4
    assert retried == ["55P03"]
    runs = bed.runs()
    assert [(r["trigger_id"], r["attempts"], r["events"]) for r in runs] == [
        (f"t{i}", 1, 2) for i in range(4)]
    assert runs[0]["created_at_ms"] == runs[1]["created_at_ms"] <= runs[2]["created_at_ms"]
    # the halves in two transactions, t0 and t1 first (ids, not clock readings a ms apart)
    tx = {r["trigger_id"]: int(r["tx"]) for r in bed.sql(
        "SELECT trigger_id, xmin::text::bigint AS tx FROM runs")}
    assert tx["t0"] == tx["t1"] < tx["t2"] == tx["t3"], tx


def held_commits(bed: SharedBed) -> HeldCommits:
    """COMMITs that advance a schedule row wait inside COMMIT until the test lets them land
    (tests.support.held_commits): the client's deadline passes first, the reply is lost.
    Made after the claims, which write the schedule rows too."""
    return HeldCommits(bed.pg.db, "AFTER UPDATE ON trigger_schedules")


def test_a_lost_commit_reply_on_a_batch_is_resolved_row_by_row(
        shared: SharedBed, monkeypatch: pytest.MonkeyPatch) -> None:
    bed = shared
    at = bed.second_ago()
    for i in range(4):
        bed.publish(f"t{i}")
        bed.due(f"t{i}", at)
    bed.publish("fresh")  # a NULL cursor: its commit only initialises it
    store = bed.store("r1", commit_deadline_s=0.4)
    params = decide(bed.claim(store, "r1", 5))
    with held_commits(bed) as held:
        def commit_lands(_settle_s: float) -> None:
            """Where the batch waits once between the lost reply and its lookups: it lands."""
            held.release()
            wait_for(lambda: len(bed.runs()) == 4)

        monkeypatch.setattr("qinglong.storage.admission.batch.pause", commit_lands)
        outcomes = store.schedule_commit_batch(params)
    got = by_trigger(params, outcomes)
    assert {t: outcome_of(o) for t, o in got.items()} == {
        "fresh": "advanced", "t0": "admitted", "t1": "admitted", "t2": "admitted",
        "t3": "admitted"}
    assert all(isinstance(o, CommitResult) and o.in_doubt for o in outcomes)
    runs = bed.runs()
    assert [(r["trigger_id"], r["token"]) for r in runs] == [
        (p.claim.candidate.trigger_id, p.claim.fence.token) for p in params[1:]]
    assert all(isinstance(o, CommitResult) and o.run_id == r["id"]
               for o, r in zip(outcomes[1:], runs, strict=True))


def test_a_lost_commit_reply_not_yet_visible_is_outcome_unknown_and_never_retried(shared: SharedBed) -> None:
    bed = shared
    at = bed.second_ago()
    for i in range(3):
        bed.publish(f"t{i}")
        bed.due(f"t{i}", at)
    store = bed.store("r1", commit_deadline_s=0.3, in_doubt_settle_s=0.05)
    params = decide(bed.claim(store, "r1", 3))
    with held_commits(bed) as held:
        outcomes = store.schedule_commit_batch(params)  # its lookups come before the commit
        assert all(isinstance(o, OutcomeUnknown) for o in outcomes), outcomes
        assert bed.runs() == []
        held.release()
        wait_for(lambda: len(bed.runs()) == 3)  # the server committed the batch; nothing retried
    assert [(r["trigger_id"], r["attempts"], r["events"]) for r in bed.runs()] == [
        (f"t{i}", 1, 2) for i in range(3)]
    bed.sql("DROP TRIGGER held_commit ON trigger_schedules")
    again = bed.claim(store, "r1", 3)  # the cursors moved: the occurrences are not due again
    assert all(c.candidate.next_fire_at_ms != at for c in again)


def test_a_lost_connection_ends_the_batch_for_every_row(shared: SharedBed) -> None:
    bed = shared
    at = bed.second_ago()
    for i in range(4):
        bed.publish(f"t{i}")
        bed.due(f"t{i}", at)
    killed: list[int] = []

    def terminate_own_backend() -> None:
        if not killed:
            [row] = bed.sql("SELECT pid FROM pg_stat_activity WHERE application_name = 'r1' "
                            "AND backend_xid IS NOT NULL AND datname = current_database()")
            killed.append(int(row["pid"]))
            bed.sql("SELECT pg_terminate_backend(?)", killed[0])

    store = bed.store("r1", before_commit=terminate_own_backend)
    params = decide(bed.claim(store, "r1", 4))
    outcomes = store.schedule_commit_batch(params)
    assert {outcome_of(o) for o in outcomes} in ({"error:QL_CONNECTION_LOST"},
                                                 {"error:QL_OUTCOME_UNKNOWN"})
    assert bed.runs() == []  # terminated before COMMIT: nothing written


def test_a_revision_tampered_with_after_the_claim_fails_its_row_alone(bed: Bed) -> None:
    """The commit verifies the trigger revision's digest again (a verified revision is only
    reused for the very same stored content): a spec changed behind the digest's back between
    claim and commit is a corrupt record of that row; the others commit."""
    at = bed.second_ago()
    for i in range(3):
        bed.publish(f"t{i}")
        bed.due(f"t{i}", at)
    store = bed.store("r1")
    params = decide(bed.claim(store, "r1", 3))
    assert bed.pg.tamper_trigger_spec('"skip"', '"fire_once"', trigger_id="t1") == 1
    got = by_trigger(params, store.schedule_commit_batch(params))
    assert {t: outcome_of(o) for t, o in got.items()} == {
        "t0": "admitted", "t1": "error:QL_RECORD_CORRUPT", "t2": "admitted"}
    assert [r["trigger_id"] for r in bed.runs()] == ["t0", "t2"]


def test_a_due_row_another_replica_holds_is_looked_at_again_within_a_second(shared: SharedBed) -> None:
    bed = shared
    bed.publish("t1")
    store = bed.store("b")
    bed.due("t1", bed.pg.now_ms() + 3_600_000)  # nothing due for an hour, nothing held
    idle = store.schedule_next_due_in_ms()
    assert idle is not None and 3_500_000 <= idle <= 3_600_000, idle  # the hour, give or take
    bed.due("t1", bed.second_ago())
    [held] = bed.claim(bed.store("a"), "a", 10, lease_ms=60_000)
    # The holder will admit the row and move it on to an occurrence this hint cannot see
    # yet, so replica b looks again within a second, not when a's claim would expire.
    hint = store.schedule_next_due_in_ms()
    assert hint is not None and 0 < hint <= 1_000, hint
    assert held.fence.expires_at_ms - bed.pg.now_ms() > 25_000


def test_a_due_row_another_replicas_claim_has_locked_is_looked_at_again_within_a_second(
        shared: SharedBed) -> None:
    """Replicas wake at the same due instant: one's claim skips the rows the other's claim
    has locked but not yet committed, and then reads them as due and unclaimed. That must
    not read as 'nothing scheduled' (a 5 s sleep, found by the failover fault test)."""
    bed = shared
    bed.publish("t1")
    bed.due("t1", bed.second_ago())
    store = bed.store("b")
    with bed.pg.db.server.connect(bed.pg.db.name) as other:  # the claim in flight
        other.execute("BEGIN")
        other.execute("SELECT 1 FROM qinglong.trigger_schedules WHERE trigger_id = 't1' FOR UPDATE")
        assert bed.claim(store, "b", 10) == []  # skipped: locked
        hint = store.schedule_next_due_in_ms()
        other.execute("ROLLBACK")
    assert hint is not None and 0 < hint <= 1_000, hint
