"""Project environments and secrets (issue 22, item 3) at the store, on every database: each
change a new revision with its audit entry (never a value), secrets sealed at rest under the
database's one key, the lease carrying the latest revision (read as ql_worker on PostgreSQL)
and the Attempt recording it, the executor opening the seals with its own key (all or
nothing), and the key's rotation."""

from __future__ import annotations

import json

import pytest

from qinglong.domain.manual import ManualRequest
from qinglong.domain.task import CommandSpec, ShellCommand
from qinglong.errors import InvalidInput, NotFound, SecretKeyMismatch, SecretKeyMissing
from qinglong.execution.project_env import EnvironmentUnavailable, project_variables
from qinglong.keyring import KEY_ENV, SecretKey, new_key_text, parse_key
from qinglong.storage.admission.params import ManualRunParams
from qinglong.storage.definitions.params import ProjectCreateParams, TaskPublishParams
from qinglong.storage.project_env import EnvActor, EnvSetParams, ProjectEnvStore
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.params import LeaseAcquireParams
from tests.contract.conftest import Backend
from tests.contract.test_manual_runs import manual_store

ALICE = EnvActor(username="alice", via="cli")
TOKEN = "s3cr3t-token-value"


def key() -> SecretKey:
    return parse_key(new_key_text(), KEY_ENV)


@pytest.fixture
def envs(backend: Backend) -> ProjectEnvStore:
    d = backend.definitions
    d.project_create(ProjectCreateParams(project_id="demo"))
    d.task_publish(TaskPublishParams(project_id="demo", task_id="greet", name="greet",
                                     spec=CommandSpec(command=ShellCommand(command="true"))))
    return ProjectEnvStore(backend.database("ql_admin", "contract-env"))


def put(store: ProjectEnvStore, name: str, value: str | None = None, *,
        secret_key: SecretKey | None = None, **more: object) -> object:
    return store.set(EnvSetParams(project_id="demo", name=name, actor=ALICE, value=value,
                                  key=secret_key, **more))  # type: ignore[arg-type]


def lease(backend: Backend, request_id: str) -> object:
    manual_store(backend).run_admit_manual(ManualRunParams(request=ManualRequest(
        project_id="demo", task_id="greet", request_id=request_id, actor="alice")))
    worker = RunStore(backend.database("ql_worker", "contract-env-worker"), actor_id="w")
    [leased] = worker.lease_acquire(LeaseAcquireParams(owner="w", lease_ms=30_000, limit=1))
    return leased


def test_each_change_is_a_revision_audited_without_its_value(backend: Backend,
                                                             envs: ProjectEnvStore) -> None:
    k = key()
    assert envs.current("demo").revision == 0
    first = put(envs, "REGION", "eu-west", description="where")
    assert first.changed and first.revision.revision == 1  # type: ignore[attr-defined]
    second = put(envs, "TOKEN", TOKEN, secret=True, secret_key=k)
    assert second.revision.revision == 2  # type: ignore[attr-defined]
    again = put(envs, "TOKEN", TOKEN, secret_key=k)  # the same value: nothing changes
    assert not again.changed and again.revision.revision == 2  # type: ignore[attr-defined]
    put(envs, "REGION", enabled=False)
    now = envs.current("demo")
    assert now.revision == 3
    by_name = {e.name: e for e in now.entries}
    assert by_name["REGION"].value == "eu-west" and not by_name["REGION"].enabled
    token = by_name["TOKEN"]
    assert token.secret and token.value is None and token.key_id == k.key_id
    assert token.value_digest.startswith("hmac-sha256:")
    # at rest: the seal, never the value, in any row or the audit log
    rows = backend.sql("SELECT * FROM project_env_entries")
    assert rows and TOKEN not in json.dumps(rows, default=str)
    audit = backend.sql("SELECT action, target, detail FROM audit_log ORDER BY id")
    assert [a["action"] for a in audit] == ["project.env.set"] * 3
    assert TOKEN not in json.dumps(audit, default=str) and "eu-west" not in json.dumps(
        audit, default=str)
    history = envs.history("demo", None, 10)
    assert [h.revision for h in history] == [3, 2, 1]
    assert history[0].change["fields"] == ["enabled"]
    removed = envs.remove("demo", "REGION", ALICE)
    assert removed.revision == 4 and [e.name for e in removed.entries] == ["TOKEN"]
    with pytest.raises(NotFound):
        envs.remove("demo", "REGION", ALICE)
    with pytest.raises(NotFound):
        envs.current("ghost")


def test_the_rules_of_a_change(envs: ProjectEnvStore) -> None:
    k = key()
    with pytest.raises(InvalidInput, match="new entry"):
        put(envs, "NEW")
    with pytest.raises(InvalidInput, match="reserved prefix"):
        put(envs, "QL_TOKEN", "x")
    with pytest.raises(SecretKeyMissing):
        put(envs, "TOKEN", TOKEN, secret=True)
    put(envs, "TOKEN", TOKEN, secret=True, secret_key=k)
    with pytest.raises(InvalidInput, match="never read back"):
        put(envs, "TOKEN", secret=False)  # making it plain would reveal it
    with pytest.raises(SecretKeyMismatch, match=k.key_id):
        put(envs, "OTHER", "y", secret=True, secret_key=key())  # one key per database
    assert envs.current("demo").revision == 1


def test_the_lease_carries_the_latest_revision_and_the_attempt_records_it(
        backend: Backend, envs: ProjectEnvStore) -> None:
    k = key()
    put(envs, "REGION", "eu-west")
    put(envs, "OFF", "nope", enabled=False)
    put(envs, "TOKEN", TOKEN, secret=True, secret_key=k)
    current = envs.current("demo")
    leased = lease(backend, "r-1")
    environment = leased.environment  # type: ignore[attr-defined]
    assert (environment.revision, environment.digest) == (3, current.digest)
    assert [v.name for v in environment.variables] == ["REGION", "TOKEN"]  # enabled only
    [attempt] = backend.sql("SELECT environment_revision, environment_digest FROM run_attempts")
    assert (attempt["environment_revision"], attempt["environment_digest"]) == (3,
                                                                               current.digest)
    run_id = leased.fence.run_id  # type: ignore[attr-defined]
    [shown] = backend.runs.run_get(run_id).attempts
    assert (shown.environment_revision, shown.environment_digest) == (3, current.digest)
    # the executor opens the secrets with its own key; without it, or with another, nothing
    assert project_variables(environment, {KEY_ENV: "qlk1:" + _text(k)}) == {
        "REGION": "eu-west", "TOKEN": TOKEN}
    with pytest.raises(EnvironmentUnavailable, match="QL_SECRET_KEY_MISSING"):
        project_variables(environment, {})
    with pytest.raises(EnvironmentUnavailable, match="QL_SECRET_KEY_MISMATCH"):
        project_variables(environment, {KEY_ENV: new_key_text()})


def _text(k: SecretKey) -> str:
    import base64

    return base64.urlsafe_b64encode(k.raw).decode().rstrip("=")


def test_rotation_seals_every_revision_again_and_keeps_the_digests(
        backend: Backend, envs: ProjectEnvStore) -> None:
    old, new = key(), key()
    put(envs, "TOKEN", TOKEN, secret=True, secret_key=old)
    put(envs, "TOKEN", TOKEN + "-2", secret_key=old)
    before = envs.current("demo")
    with pytest.raises(SecretKeyMismatch, match=old.key_id):
        envs.rotate(key(), new, ALICE)  # not the key they are under
    done = envs.rotate(old, new, ALICE)
    assert (done.from_key, done.to_key, done.resealed) == (old.key_id, new.key_id, 2)
    assert envs.rotate(old, new, ALICE).already  # a second run changes nothing
    after = envs.current("demo")
    assert (after.revision, after.digest) == (before.revision, before.digest)
    assert {r["key_id"] for r in backend.sql("SELECT key_id FROM project_env_entries")} == {
        new.key_id}
    # the same value set with the new key is still the same value (the digest key stayed)
    assert not put(envs, "TOKEN", TOKEN + "-2", secret_key=new).changed  # type: ignore[attr-defined]
    leased = lease(backend, "r-rot")
    assert project_variables(leased.environment,  # type: ignore[attr-defined]
                             {KEY_ENV: "qlk1:" + _text(new)}) == {"TOKEN": TOKEN + "-2"}
    [audit] = backend.sql("SELECT detail FROM audit_log WHERE action = 'secret.rotate-key'")
    assert TOKEN not in json.dumps(audit, default=str)
