"""Project dependency sets on SQLite and PostgreSQL (issue 22, item 4; docs/dependencies.md):
every change a revision with the SHA-256 of the canonical set, the same set again records
nothing, the first change publishes the install task (kind deps), `install` admits a Run of
it, bad specifiers and unknown packages are refused with the field, an archived project's set
cannot change, and a worker (ql_worker on PostgreSQL) reads the current set."""

from __future__ import annotations

import pytest

from qinglong.domain.deps import INSTALL_TASK, DepSet
from qinglong.errors import Conflict, InvalidInput, NotFound
from qinglong.service.container import Services
from qinglong.storage.deps import DepStore
from qinglong.storage.stores import Stores
from tests.contract.conftest import Backend


@pytest.fixture
def web(web_demo: Stores) -> Stores:
    return web_demo


@pytest.fixture
def services(demo_services: Services) -> Services:
    return demo_services


def test_changes_are_revisions_of_the_canonical_set(services: Services) -> None:
    deps = services.deps
    assert deps.show("demo") is None and deps.history("demo") == []
    first, made = deps.add("demo", ["Requests == 2.32.*", "qltiny"], ["axios@1"], "alice")
    assert made and first.revision == 1 and first.actor == "alice"
    assert first.deps == DepSet(python=("qltiny", "requests==2.32.*"), node=("axios@1",))
    assert first.digest == first.deps.digest and len(first.digest) == 64
    # the same packages again, written another way: nothing new
    same, made = deps.add("demo", ["requests==2.32.*"], [], "bob")
    assert not made and same.revision == 1 and same.digest == first.digest
    # a package already in the set takes the new specifier
    second, made = deps.add("demo", ["requests>=2.31,<3"], ["@scope/pkg@^2.1"], "bob")
    assert made and second.revision == 2
    assert second.deps.python == ("qltiny", "requests>=2.31,<3")
    assert second.deps.node == ("@scope/pkg@^2.1", "axios@1")
    third, made = deps.remove("demo", ["requests"], ["axios"], "carol")
    assert made and third.deps == DepSet(python=("qltiny",), node=("@scope/pkg@^2.1",))
    assert [r.revision for r in deps.history("demo")] == [3, 2, 1]
    assert deps.show("demo") == third
    # back to an earlier set: a new revision with that set's digest (its cache key)
    fourth, _ = deps.add("demo", ["requests==2.32.*"], ["axios@1"], "carol")
    fifth, _ = deps.remove("demo", [], ["@scope/pkg"], "carol")
    assert fifth.revision == 5 and fifth.digest == first.digest
    assert fourth.digest != fifth.digest


def test_the_first_change_publishes_the_install_task_and_install_admits_its_run(
        services: Services, web: Stores) -> None:
    with pytest.raises(NotFound):
        services.deps.install("demo", "alice", "req-0")  # no set yet: no install task
    services.deps.add("demo", ["qltiny"], [], "alice")
    task = services.catalog.task_show("demo", INSTALL_TASK)
    assert task.command.kind == "deps" and task.enabled and task.concurrency == 1
    services.deps.add("demo", [], ["axios"], "alice")
    assert services.catalog.task_show("demo", INSTALL_TASK).revision == 1  # published once
    run_id = services.deps.install("demo", "alice", "req-1")
    detail = web.runs.run_get(run_id)
    assert detail.run.task_id == INSTALL_TASK and detail.run.status == "queued"
    # asked again with the same request: the same Run
    assert services.deps.install("demo", "alice", "req-1") == run_id


@pytest.mark.parametrize(("python", "node", "field"), [
    (["requests; rm -rf /"], [], "python"),
    (["-e ."], [], "python"),
    (["--index-url=http://evil"], [], "python"),
    (["pkg @ https://example.com/x.whl"], [], "python"),
    ([], ["axios@1 && echo"], "node"),
    ([], ["--registry=http://evil"], "node"),
    ([], ["git+https://github.com/x/y.git"], "node"),
    ([], ["Axios"], "node"),
    ([], [], "deps"),
])
def test_bad_specifiers_are_refused_with_the_field(services: Services, python: list[str],
                                                   node: list[str], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        services.deps.add("demo", python, node, "alice")
    assert caught.value.field == field
    assert services.deps.show("demo") is None


def test_unknown_packages_projects_and_archived_projects(services: Services,
                                                         web: Stores) -> None:
    with pytest.raises(NotFound):
        services.deps.remove("demo", ["requests"], [], "alice")  # no set at all
    services.deps.add("demo", ["qltiny"], [], "alice")
    with pytest.raises(InvalidInput) as caught:
        services.deps.remove("demo", ["requests"], [], "alice")
    assert caught.value.field == "python" and "requests" in caught.value.rule
    with pytest.raises(NotFound):
        services.deps.add("nope", ["qltiny"], [], "alice")
    web.definitions.project_archive("demo")
    with pytest.raises(Conflict):
        services.deps.add("demo", ["requests"], [], "alice")
    assert services.deps.show("demo") is not None  # still readable


def test_a_worker_reads_the_current_set(services: Services, backend: Backend) -> None:
    worker = DepStore(backend.database("ql_worker", "contract-deps-worker"))
    assert worker.current("demo") is None and worker.recent("demo") == []
    first, _ = services.deps.add("demo", ["qltiny"], ["axios@1"], "alice")
    made, _ = services.deps.add("demo", ["requests"], [], "alice")
    found = worker.current("demo")
    assert found is not None and found.revision == 2 and found.digest == made.digest
    assert found.deps == made.deps
    assert worker.recent("demo") == [made, first]  # the current set first
