"""Git subscriptions on SQLite and PostgreSQL against local bare repositories (issue 22,
item 2; docs/subscriptions.md): a pull imports the selected scripts in one transaction,
reports what it could not import (and imports the rest), makes tasks and triggers of cron
header lines with auto-tasks, follows changes, renames, deletions and force-pushes, never
deletes a task (it disables it), and a pull that finds nothing new writes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from qinglong.domain.repos import PULL_LABEL, RepoSpec, pull_task_id
from qinglong.errors import Conflict, InvalidInput, NotFound, RepoFetchFailed
from qinglong.service.container import Services
from qinglong.storage.stores import Stores
from tests.contract.conftest import Backend

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "GIT_CONFIG_NOSYSTEM": "1"}
SIGN = "// cron: 15 8 * * *\nconst $ = new Env('Daily sign');\nconsole.log('sign');\n"
REPORT = "# cron: 0 */2 * * *\nprint('report')\n"
HELPER = "module.exports = 1;\n"
BAD_CRON = "# cron: 61 * * * *\nprint('bad')\n"


class Origin:
    """A bare repository and a working copy that pushes to it."""

    def __init__(self, root: Path) -> None:
        self.bare = root / "origin.git"
        self.work = root / "work"
        self._git("init", "--quiet", "--bare", "--initial-branch=main", str(self.bare))
        self._git("clone", "--quiet", str(self.bare), str(self.work))
        self._git("-C", str(self.work), "checkout", "--quiet", "-b", "main")

    def _git(self, *args: str) -> None:
        subprocess.run(["git", *args], env=GIT_ENV, check=True, capture_output=True)

    def commit(self, files: dict[str, str | bytes | None], *, force: bool = False,
               links: dict[str, str] | None = None) -> None:
        """Write (None: delete) the files and ``links`` (symbolic links: path -> target),
        commit and push (``force``: as a new root)."""
        if force:
            self._git("-C", str(self.work), "checkout", "--quiet", "--orphan", "rewrite")
            self._git("-C", str(self.work), "rm", "-r", "--quiet", "--cached", ".")
        for path, content in files.items():
            target = self.work / path
            if content is None:
                self._git("-C", str(self.work), "rm", "--quiet", path)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
            self._git("-C", str(self.work), "add", path)
        for path, target in (links or {}).items():
            (self.work / path).symlink_to(target)
            self._git("-C", str(self.work), "add", path)
        self._git("-C", str(self.work), "commit", "--quiet", "-m", "change")
        if force:
            self._git("-C", str(self.work), "push", "--quiet", "--force", "origin", "rewrite:main")
        else:
            self._git("-C", str(self.work), "push", "--quiet", "origin", "main")


@pytest.fixture
def web(web_demo: Stores) -> Stores:
    return web_demo


@pytest.fixture
def services(demo_services: Services) -> Services:
    return demo_services


@pytest.fixture
def origin(tmp_path: Path) -> Origin:
    return Origin(tmp_path)


def _pull(services: Services, said: list[str] | None = None):  # type: ignore[no-untyped-def]
    return services.repos.import_run("demo", "jd", "repo:jd", GIT_ENV,
                                     (said if said is not None else []).append)


def _counts(backend: Backend) -> tuple[int, int, int]:
    return tuple(backend.sql(f"SELECT count(*) AS n FROM {table}")[0]["n"]  # type: ignore[return-value]
                 for table in ("script_revisions", "task_definition_revisions",
                               "trigger_revisions"))


def _task(services: Services, task: str) -> tuple[bool, str | None]:
    shown = services.catalog.task_show("demo", task)
    return shown.enabled, shown.command.script


def test_add_publishes_the_pull_task_and_its_trigger(services: Services, origin: Origin,
                                                     backend: Backend) -> None:
    origin.commit({"a.py": "print(1)\n"})
    services.repos.add("demo", "jd", RepoSpec(url=str(origin.bare)), "alice",
                       cron="*/30 * * * *", timezone="Asia/Shanghai")
    pull = services.catalog.task_show("demo", pull_task_id("jd"))
    assert (pull.command.kind, pull.command.repo, pull.concurrency) == ("repo", "jd", 1)
    cluster = backend.capabilities.shared
    assert pull.requires == ([PULL_LABEL] if cluster else [])
    [trigger] = services.catalog.trigger_list("demo", trigger_id=pull_task_id("jd"))
    assert (trigger.task, trigger.timezone) == (pull_task_id("jd"), "Asia/Shanghai")
    with pytest.raises(Conflict, match="exists already"):
        services.repos.add("demo", "jd", RepoSpec(url=str(origin.bare)), "alice", cron=None)
    services.repos.remove("demo", "jd")
    assert services.catalog.task_show("demo", pull_task_id("jd")).enabled is False
    with pytest.raises(NotFound):
        services.repos.get("demo", "jd")
    # added again: it continues, its pull task enabled again
    services.repos.add("demo", "jd", RepoSpec(url=str(origin.bare)), "alice", cron=None)
    assert services.catalog.task_show("demo", pull_task_id("jd")).enabled is True


def test_a_pull_imports_reports_and_makes_tasks_once(services: Services, origin: Origin,
                                                     backend: Backend) -> None:
    origin.commit({"jd_sign.js": SIGN, "tools/report.py": REPORT, "utils/helper.js": HELPER,
                   "README.md": "# readme\n", "bin.py": b"\x00\x01binary",
                   "broken.py": BAD_CRON, "skip/old.py": "print('old')\n"})
    services.repos.add("demo", "jd", RepoSpec(url=str(origin.bare), exclude=("skip/*",),
                                              auto_tasks=True, timezone="Asia/Shanghai"),
                       "alice", cron=None)
    said: list[str] = []
    report = _pull(services, said)
    assert report.saved == ("jd/broken.py", "jd/jd_sign.js", "jd/tools/report.py",
                            "jd/utils/helper.js")
    problems = dict(report.problems)
    assert "NUL" in problems["bin.py"] and "61" in problems["broken.py"], problems
    assert report.tasks_created == ("jd-jd-sign", "jd-tools-report")
    assert any(line.startswith("commit ") for line in said), said
    assert services.catalog.task_show("demo", "jd-jd-sign").name == "Daily sign"
    [trigger] = services.catalog.trigger_list("demo", trigger_id="jd-tools-report")
    assert (trigger.cron, trigger.timezone) == ("0 */2 * * *", "Asia/Shanghai")
    assert services.repos.get("demo", "jd").last_commit == report.commit
    # the same branch again: nothing is written
    before = _counts(backend)
    again = _pull(services)
    assert (again.saved, again.removed, again.tasks_created, again.tasks_updated,
            again.tasks_disabled, again.wrote) == ((), (), (), (), (), False)
    assert _counts(backend) == before


def test_changes_renames_deletions_and_force_pushes_follow_the_branch(
        services: Services, origin: Origin) -> None:
    origin.commit({"jd_sign.js": SIGN, "tools/report.py": REPORT, "utils/helper.js": HELPER})
    services.repos.add("demo", "jd", RepoSpec(url=str(origin.bare), auto_tasks=True), "alice",
                       cron=None)
    _pull(services)
    # a change to a cron line, a rename and a deletion in one push
    origin.commit({"tools/report.py": None, "tools/weekly.py": REPORT.replace("0 */2", "0 9"),
                   "jd_sign.js": SIGN.replace("15 8", "30 7"), "utils/helper.js": None})
    report = _pull(services)
    assert report.saved == ("jd/jd_sign.js", "jd/tools/weekly.py")
    assert report.removed == ("jd/tools/report.py", "jd/utils/helper.js")
    assert report.tasks_created == ("jd-tools-weekly",)
    assert report.tasks_disabled == ("jd-tools-report",)
    [trigger] = services.catalog.trigger_list("demo", trigger_id="jd-jd-sign")
    assert trigger.cron == "30 7 * * *"
    assert _task(services, "jd-tools-report") == (False, "jd/tools/report.py")
    [stopped] = services.catalog.trigger_list("demo", trigger_id="jd-tools-report")
    assert stopped.enabled is False
    # a force-push to a new history with one script: the rest goes, nothing is deleted
    origin.commit({"only.sh": "# cron: 5 5 * * *\necho only\n"}, force=True)
    forced = _pull(services)
    assert forced.saved == ("jd/only.sh",)
    assert forced.removed == ("jd/jd_sign.js", "jd/tools/weekly.py")
    assert set(forced.tasks_disabled) == {"jd-jd-sign", "jd-tools-weekly"}
    assert [s.path for s in services.scripts.listing("demo")] == ["jd/only.sh"]
    # every task stays, with its Runs' history: the pull task, sign, report, weekly and only
    assert len(services.catalog.task_list("demo")) == 5


def test_a_fetch_that_fails_writes_nothing_and_says_why(services: Services, origin: Origin,
                                                        backend: Backend) -> None:
    origin.commit({"a.py": "print(1)\n"})
    services.repos.add("demo", "jd", RepoSpec(url=str(origin.bare), branch="nope"), "alice",
                       cron=None)
    before = _counts(backend)
    with pytest.raises(RepoFetchFailed, match="nope"):
        _pull(services)
    assert _counts(backend) == before
    assert services.repos.get("demo", "jd").last_commit is None


@pytest.mark.parametrize(("spec", "field"), [
    ({"url": "https://user:pw@example.com/r.git"}, "url"),
    ({"url": "not a url"}, "url"),
    ({"url": "-upload-pack=evil"}, "url"),
    ({"url": "/r.git", "branch": "../main"}, "branch"),
    ({"url": "/r.git", "include": ("/abs/*.py",)}, "path"),
    ({"url": "/r.git", "token_env": "bad name"}, "token-env"),
])
def test_bad_subscriptions_are_refused_with_the_field(spec: dict[str, object],
                                                      field: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        RepoSpec(**spec)  # type: ignore[arg-type]
    assert refused.value.field == field


def test_a_task_auto_tasks_did_not_make_is_never_taken_over(services: Services,
                                                            origin: Origin) -> None:
    """A task that has the id a header would make, but runs something else, is left as it
    is and reported; so are a symbolic link and a file larger than a script may be."""
    from qinglong.domain.publishing import TaskPatch
    from qinglong.domain.task import ShellCommand
    from qinglong.service.catalog import TaskPublishRequest

    services.catalog.task_publish(TaskPublishRequest(
        project_id="demo", task_id="jd-report", patch=TaskPatch(
            command=ShellCommand(command="echo mine"))))
    origin.commit({"report.py": REPORT, "huge.py": "#" * (1024 * 1024 + 1)},
                  links={"link.py": "report.py"})
    services.repos.add("demo", "jd", RepoSpec(url=str(origin.bare), auto_tasks=True), "alice",
                       cron=None)
    report = _pull(services)
    problems = dict(report.problems)
    assert "exists and runs something else" in problems["report.py"], problems
    assert "symbolic link" in problems["link.py"] and "larger" in problems["huge.py"], problems
    assert report.saved == ("jd/report.py",) and report.tasks_created == ()
    assert services.catalog.task_show("demo", "jd-report").command.kind == "shell"


def test_a_private_repository_is_pulled_with_the_token_from_the_environment(
        services: Services, origin: Origin, tmp_path: Path) -> None:
    """Over HTTP with basic authentication (git's own backend): the token named by
    --token-env is taken from the pull's environment (the project's, in a Run); without it,
    or with a wrong one, the pull fails saying so and writes nothing."""
    from tests.support.git_http import private_git_server

    origin.commit({"a.py": "print('private')\n"})
    with private_git_server(origin.bare.parent, "t0ken") as base:
        url = f"{base}/{origin.bare.name}"
        services.repos.add("demo", "jd", RepoSpec(url=url, token_env="GH_TOKEN"), "alice",
                           cron=None)
        with pytest.raises(InvalidInput, match="GH_TOKEN"):
            _pull(services)
        with pytest.raises(RepoFetchFailed, match="asks for credentials"):
            services.repos.import_run("demo", "jd", "repo:jd", {**GIT_ENV, "GH_TOKEN": "nope"},
                                      [].append)
        assert services.scripts.listing("demo") == []
        report = services.repos.import_run("demo", "jd", "repo:jd",
                                           {**GIT_ENV, "GH_TOKEN": "t0ken"}, [].append)
    assert report.saved == ("jd/a.py",)


def test_a_subscription_never_takes_over_a_task_of_its_pull_task_id(services: Services,
                                                                     origin: Origin) -> None:
    from qinglong.domain.publishing import TaskPatch
    from qinglong.domain.task import ShellCommand
    from qinglong.service.catalog import TaskPublishRequest

    services.catalog.task_publish(TaskPublishRequest(
        project_id="demo", task_id="repo-jd", patch=TaskPatch(
            command=ShellCommand(command="echo mine"))))
    with pytest.raises(Conflict, match="runs something else"):
        services.repos.add("demo", "jd", RepoSpec(url=str(origin.bare)), "alice", cron=None)
    assert services.repos.listing("demo", removed=True) == []
    assert services.catalog.task_show("demo", "repo-jd").command.kind == "shell"
