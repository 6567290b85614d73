"""The script store on SQLite and PostgreSQL (docs/scripts.md): every save an immutable
revision named by its SHA-256, a concurrent save refused rather than overwritten, removals
kept in the history, content verified when read, and the tasks that run a script moved onto a
new save in the same transaction (or left where they are when asked)."""

from __future__ import annotations

import hashlib

import pytest

from qinglong.domain.publishing import TaskPatch
from qinglong.domain.scripts import MAX_SCRIPT_BYTES, ScriptRef
from qinglong.domain.task import ScriptCommand
from qinglong.errors import Conflict, InvalidInput, NotFound, RecordCorrupt
from qinglong.service.catalog import TaskPublishRequest
from qinglong.service.container import Services
from qinglong.service.definition_model import DefinitionErrors
from qinglong.service.definition_yaml import parse_text
from qinglong.service.definition_yaml_write import dump_projects
from qinglong.storage.stores import Stores
from tests.contract.conftest import Backend

HELLO = b"print('hello')\n"


@pytest.fixture
def web(web_demo: Stores) -> Stores:
    return web_demo


@pytest.fixture
def services(demo_services: Services) -> Services:
    return demo_services


def test_each_save_is_a_revision_named_by_its_sha256(services: Services) -> None:
    first = services.scripts.put("demo", "jd/sign.py", HELLO, "alice")
    assert (first.revision, first.changed, first.size_bytes) == (1, True, len(HELLO))
    assert first.digest == hashlib.sha256(HELLO).hexdigest()
    again = services.scripts.put("demo", "jd/sign.py", HELLO, "bob")
    assert (again.revision, again.changed, again.created_by) == (1, False, "alice")
    second = services.scripts.put("demo", "jd/sign.py", b"print('bye')\n", "bob")
    assert (second.revision, second.changed) == (2, True)
    assert services.scripts.get("demo", "jd/sign.py").content == "print('bye')\n"
    assert services.scripts.get("demo", "jd/sign.py", 1).content == HELLO.decode()
    assert [v.revision for v in services.scripts.history("demo", "jd/sign.py")] == [2, 1]
    assert [v.path for v in services.scripts.listing("demo")] == ["jd/sign.py"]
    assert [v.path for v in services.scripts.listing("demo", "jd")] == ["jd/sign.py"]
    assert services.scripts.listing("demo", "other/") == []


def test_the_same_bytes_in_two_paths_are_stored_once(services: Services, backend: Backend) -> None:
    services.scripts.put("demo", "a.py", HELLO, "alice")
    services.scripts.put("demo", "b.py", HELLO, "alice")
    assert backend.sql("SELECT count(*) AS n FROM script_blobs")[0]["n"] == 1


def test_a_save_from_an_older_revision_is_refused_not_overwritten(services: Services) -> None:
    services.scripts.put("demo", "x.sh", b"echo 1\n", "alice", expected_revision=0)
    services.scripts.put("demo", "x.sh", b"echo 2\n", "bob", expected_revision=1)
    with pytest.raises(Conflict, match="revision 2, not 1"):
        services.scripts.put("demo", "x.sh", b"echo 3\n", "alice", expected_revision=1)
    with pytest.raises(Conflict, match="revision 2, not 0"):
        services.scripts.put("demo", "x.sh", b"echo 3\n", "carol", expected_revision=0)
    assert services.scripts.get("demo", "x.sh").content == "echo 2\n"


@pytest.mark.parametrize(("path", "content", "field", "says"), [
    ("/abs.py", HELLO, "path", "relative"),
    ("a/../b.py", HELLO, "path", "'..'"),
    ("a//b.py", HELLO, "path", "empty"),
    ("-x.py", HELLO, "path", "starting with '-'"),
    ("bin.py", b"\x7fELF\x00\x01", "content", "binary"),
    ("latin.py", b"caf\xe9\n", "content", "UTF-8"),
    ("big.py", b"#" * (MAX_SCRIPT_BYTES + 1), "content", "at most"),
])
def test_bad_paths_and_contents_are_refused_with_the_reason(
        services: Services, path: str, content: bytes, field: str, says: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        services.scripts.put("demo", path, content, "alice")
    assert refused.value.field == field and says in refused.value.rule
    assert services.scripts.listing("demo", removed=True) == []


def test_a_removal_is_a_revision_and_the_history_stays(services: Services) -> None:
    services.scripts.put("demo", "gone.py", HELLO, "alice")
    removed, still = services.scripts.remove("demo", "gone.py", "bob")
    assert (removed.revision, removed.digest, still) == (2, None, [])
    with pytest.raises(NotFound):
        services.scripts.get("demo", "gone.py")
    assert services.scripts.get("demo", "gone.py", 1).content == HELLO.decode()
    assert services.scripts.listing("demo") == []
    assert [v.digest is None for v in services.scripts.listing("demo", removed=True)] == [True]
    with pytest.raises(NotFound):
        services.scripts.remove("demo", "gone.py", "bob")
    back = services.scripts.put("demo", "gone.py", HELLO, "carol", expected_revision=0)
    assert (back.revision, back.changed) == (3, True)  # new again: 0 is its expected revision


def test_stored_content_that_changed_is_never_served(services: Services, web: Stores,
                                                     backend: Backend) -> None:
    saved = services.scripts.put("demo", "t.py", HELLO, "alice")
    assert saved.digest is not None
    assert web.scripts.content(saved.digest) == HELLO
    evil = b"print('evil!')\n"  # as long as HELLO: the size check still holds
    assert len(evil) == len(HELLO)
    backend.sql("UPDATE script_blobs SET content = ? WHERE digest = ?", evil, saved.digest)
    with pytest.raises(RecordCorrupt, match="SHA-256"):
        web.scripts.content(saved.digest)
    with pytest.raises(RecordCorrupt):
        services.scripts.get("demo", "t.py")
    with pytest.raises(NotFound):
        web.scripts.content("0" * 64)


def test_a_task_pins_the_script_and_follows_each_save(services: Services) -> None:
    services.scripts.put("demo", "job.py", HELLO, "alice")
    published = services.catalog.task_publish(TaskPublishRequest(
        project_id="demo", task_id="job", patch=TaskPatch(command=ScriptRef(
            path="job.py", args=("--fast",)))))
    command = published.command
    assert (command.kind, command.script, command.interpreter, command.digest) == (
        "script", "job.py", "python3", hashlib.sha256(HELLO).hexdigest())
    assert command.argv == ["python3", "job.py", "--fast"]
    saved = services.scripts.put("demo", "job.py", b"print(2)\n", "bob")
    assert saved.tasks_updated == ["job"] and saved.tasks_behind == []
    task = services.catalog.task_show("demo", "job")
    assert task.revision == 2 and task.command.digest == saved.digest
    kept = services.scripts.put("demo", "job.py", b"print(3)\n", "bob", keep_tasks=True)
    assert kept.tasks_updated == [] and kept.tasks_behind == ["job"]
    assert services.catalog.task_show("demo", "job").command.digest == saved.digest
    _, still = services.scripts.remove("demo", "job.py", "bob")
    assert still == ["job"]


def test_a_task_of_a_missing_script_or_unknown_extension_is_refused(services: Services) -> None:
    with pytest.raises(NotFound):
        services.catalog.task_publish(TaskPublishRequest(
            project_id="demo", task_id="t", patch=TaskPatch(command=ScriptRef(path="no.py"))))
    services.scripts.put("demo", "tool.rb", b"puts 1\n", "alice")
    with pytest.raises(InvalidInput, match="extension"):
        ScriptRef(path="tool.rb")
    pinned = services.catalog.pinned_script("demo", ScriptRef(path="tool.rb", interpreter="sh"))
    assert isinstance(pinned, ScriptCommand) and pinned.interpreter == "sh"


def test_a_save_whose_task_cannot_follow_writes_nothing(services: Services, web: Stores,
                                                        backend: Backend) -> None:
    """The save and the tasks it moves commit together: an archived project refuses both."""
    services.scripts.put("demo", "job.py", HELLO, "alice")
    services.catalog.task_publish(TaskPublishRequest(
        project_id="demo", task_id="job", patch=TaskPatch(command=ScriptRef(path="job.py"))))
    services.catalog.project_archive("demo")
    with pytest.raises(Conflict):
        services.scripts.put("demo", "job.py", b"print(2)\n", "bob")
    assert backend.sql("SELECT count(*) AS n FROM script_revisions")[0]["n"] == 1


def test_apply_pins_a_script_task_and_export_writes_it_back(services: Services) -> None:
    services.scripts.put("demo", "tools/report.js", b"console.log(1)\n", "alice")
    text = """\
apiVersion: qinglong/v1
project: demo
tasks:
  report: {script: tools/report.js, args: [--all]}
"""
    services.declarative.apply(services.declarative.plan(parse_text(text)))
    task = services.catalog.task_show("demo", "report")
    assert (task.command.kind, task.command.interpreter) == ("script", "node")
    assert task.command.argv == ["node", "tools/report.js", "--all"]
    projects, _ = services.declarative.export(["demo"])
    written = dump_projects(projects)
    assert "script: tools/report.js" in written and "interpreter" not in written
    assert "args: [--all]" in written
    missing = text.replace("tools/report.js", "tools/none.js")
    with pytest.raises(DefinitionErrors, match=r"no script 'tools/none\.js'"):
        services.declarative.plan(parse_text(missing))
