"""Git subscriptions: a repository of scripts that a project pulls on a schedule
(docs/subscriptions.md).

A subscription names the repository (``url``, ``branch``), which of its files are scripts
(``include`` and ``exclude`` globs), where they go in the project (the folder named after the
subscription) and whether their header lines make tasks (``auto_tasks``). The header
convention is the one of qinglong script repositories: within a script's first lines, a
``cron:`` line gives its schedule and ``new Env('...')`` (or a ``name:`` line) its display
name.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from qinglong.domain.identifiers import ENTITY_ID, entity_id
from qinglong.domain.task_env import ENV_NAME
from qinglong.errors import InvalidInput

MAX_URL = 2048
MAX_GLOBS = 16
MAX_GLOB = 256
HEADER_LINES = 40  # how far into a script its header lines are looked for
DEFAULT_INCLUDE = ("*.py", "*.js", "*.mjs", "*.cjs", "*.sh")
PULL_LABEL = "ql-repos"  # the worker label a pull needs (a worker given --repos-url offers it)
_BRANCH = re.compile(r"^(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/-]{1,200}(?<!/)(?<!\.lock)$")
_SCP = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s]+$")  # git@github.com:owner/repo.git
_CRON = re.compile(r"""(?:^|[\s/#*"'])cron[:=]\s*["']?([0-9*/,\-?LW# A-Za-z]+?)["']?\s*(?:$|;|,\s|\s\S+=)""")
_CRON_QUOTED = re.compile(r"""(?:^|[\s/#*])cron\s+["']([^"'\n]{9,120})["']""")  # Quantumult X
_NAME_ENV = re.compile(r"""new\s+Env\(\s*["']([^"'\n]{1,200})["']\s*\)""")
_NAME_LINE = re.compile(r"""(?:^|[\s/#*])name[:=]\s*["']?([^"'\n]{1,200}?)["']?\s*$""")


def check_url(url: object) -> str:
    """A repository URL git can fetch: https://, http://, ssh://, git://, file://, an scp-like
    ``user@host:path`` or an absolute local path."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL or any(
            c.isspace() or ord(c) < 0x20 for c in url):
        raise InvalidInput("url", f"must be a repository URL of at most {MAX_URL} characters "
                                  "without spaces")
    if url.startswith("-"):
        raise InvalidInput("url", "must not start with '-'")
    schemes = ("https://", "http://", "ssh://", "git://", "file://")
    if url.startswith(schemes) or _SCP.fullmatch(url) or url.startswith("/"):
        if "@" in url.split("://", 1)[-1].split("/", 1)[0] and url.startswith(("https://",
                                                                               "http://")):
            raise InvalidInput("url", "must not hold credentials: give a token with "
                                      "--token-env instead")
        return url
    raise InvalidInput("url", f"{url!r} is not a repository URL (https://, ssh://, git://, "
                              "file://, user@host:path or an absolute path)")


def check_branch(branch: object) -> str:
    if not isinstance(branch, str) or not _BRANCH.fullmatch(branch):
        raise InvalidInput("branch", "must be a branch name such as main or release/2026")
    return branch


def check_globs(globs: object, field: str) -> tuple[str, ...]:
    if not isinstance(globs, list | tuple):
        raise InvalidInput(field, "must be a list of glob patterns")
    found = tuple(globs)
    if len(found) > MAX_GLOBS:
        raise InvalidInput(field, f"at most {MAX_GLOBS} patterns")
    for glob in found:
        if not isinstance(glob, str) or not glob or len(glob) > MAX_GLOB or glob.startswith("/") \
                or any(ord(c) < 0x20 for c in glob):
            raise InvalidInput(field, f"{glob!r} must be a relative glob such as *.py or "
                                      "jd/**/*.js")
    return found


def _env_name(value: str | None, field: str) -> str | None:
    if value is not None and not ENV_NAME.fullmatch(value):
        raise InvalidInput(field, "must name a variable of the project's environment "
                                  "([A-Za-z_][A-Za-z0-9_]*)")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class RepoSpec:
    """What a subscription pulls and what it makes of it."""

    url: str
    branch: str = "main"
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = ()
    auto_tasks: bool = False
    timezone: str = "UTC"  # of the tasks' cron lines
    token_env: str | None = None  # an https token: this entry of the project's environment
    ssh_key_env: str | None = None  # an ssh deploy key: this entry of the project's environment

    def __post_init__(self) -> None:
        check_url(self.url)
        check_branch(self.branch)
        object.__setattr__(self, "include", check_globs(self.include, "path"))
        object.__setattr__(self, "exclude", check_globs(self.exclude, "exclude"))
        if not self.include:
            raise InvalidInput("path", "name at least one glob (e.g. *.py)")
        if not isinstance(self.auto_tasks, bool):
            raise InvalidInput("auto_tasks", "must be true or false")
        _env_name(self.token_env, "token-env")
        _env_name(self.ssh_key_env, "ssh-key-env")
        if self.token_env and self.ssh_key_env:
            raise InvalidInput("token-env", "give a token or an ssh key, not both")

    def to_json(self) -> dict[str, object]:
        return {"url": self.url, "branch": self.branch, "include": list(self.include),
                "exclude": list(self.exclude), "auto_tasks": self.auto_tasks,
                "timezone": self.timezone, "token_env": self.token_env,
                "ssh_key_env": self.ssh_key_env}

    @classmethod
    def from_json(cls, value: Mapping[str, object]) -> RepoSpec:
        return cls(url=str(value["url"]), branch=str(value["branch"]),
                   include=tuple(value["include"]),  # type: ignore[arg-type]
                   exclude=tuple(value["exclude"]),  # type: ignore[arg-type]
                   auto_tasks=bool(value["auto_tasks"]), timezone=str(value["timezone"]),
                   token_env=value.get("token_env"),  # type: ignore[arg-type]
                   ssh_key_env=value.get("ssh_key_env"))  # type: ignore[arg-type]

    def wants(self, path: str) -> bool:
        """Whether a file of the repository at ``path`` is one of the subscription's scripts
        (a glob without a slash matches the file's name in any folder)."""
        def hit(glob: str) -> bool:
            if "/" not in glob:
                return fnmatch.fnmatchcase(path.rsplit("/", 1)[-1], glob)
            return fnmatch.fnmatchcase(path, glob) or (
                glob.startswith("**/") and fnmatch.fnmatchcase(path, glob[3:]))
        return any(hit(g) for g in self.include) and not any(hit(g) for g in self.exclude)


def check_repo_name(name: str) -> str:
    return entity_id(name, "repo")


def pull_task_id(repo: str) -> str:
    """The task whose Runs are the subscription's pulls."""
    return f"repo-{repo}"[:128]


@dataclass(frozen=True, slots=True)
class Header:
    """What a script's header lines say: its schedule and name (None: not said)."""

    cron: str | None
    name: str | None
    problem: str | None = None  # a header line that is there but unusable


def read_header(text: str, check_cron: Callable[[str], None]) -> Header:
    """The cron and name lines among a script's first ``HEADER_LINES`` lines; a cron line
    whose schedule ``check_cron`` refuses is a problem, reported, and makes no task."""
    cron = name = None
    for line in text.splitlines()[:HEADER_LINES]:
        if cron is None:
            found = _CRON.search(line) or _CRON_QUOTED.search(line)
            if found:
                cron = " ".join(found.group(1).split())
        if name is None:
            named = _NAME_ENV.search(line) or _NAME_LINE.search(line)
            if named:
                name = named.group(1).strip()
    if cron is not None:
        try:
            check_cron(cron)
        except InvalidInput as exc:
            return Header(cron=None, name=name, problem=f"cron line {cron!r}: {exc.rule}")
    return Header(cron=cron, name=name)


def task_id_for(repo: str, path: str) -> str:
    """The task a script's header makes: named after the subscription and the script's path
    (a long or unusual path gets a short digest instead of its tail)."""
    stem = path.rsplit(".", 1)[0] if "." in path.rsplit("/", 1)[-1] else path
    slug = re.sub(r"[^a-z0-9]+", "-", f"{repo}-{stem}".lower()).strip("-")
    if len(slug) > 60 or not ENTITY_ID.fullmatch(slug):
        digest = hashlib.sha256(path.encode()).hexdigest()[:10]
        slug = f"{slug[:48].rstrip('-')}-{digest}"
    return slug


@dataclass(frozen=True, slots=True, kw_only=True)
class PullReport:
    """What one pull did, file by file."""

    commit: str
    saved: tuple[str, ...] = ()  # new or changed scripts
    removed: tuple[str, ...] = ()
    unchanged: int = 0
    problems: tuple[tuple[str, str], ...] = ()  # (path, why it was not imported)
    tasks_created: tuple[str, ...] = ()
    tasks_updated: tuple[str, ...] = ()
    tasks_disabled: tuple[str, ...] = ()
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def wrote(self) -> bool:
        return bool(self.saved or self.removed or self.tasks_created or self.tasks_updated
                    or self.tasks_disabled)

    def to_json(self) -> dict[str, object]:
        return {"commit": self.commit, "saved": list(self.saved), "removed": list(self.removed),
                "unchanged": self.unchanged,
                "problems": [{"path": p, "why": w} for p, w in self.problems],
                "tasks_created": list(self.tasks_created),
                "tasks_updated": list(self.tasks_updated),
                "tasks_disabled": list(self.tasks_disabled)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Repo:
    """A subscription as stored, with what its latest pull found."""

    project_id: str
    name: str
    spec: RepoSpec
    created_by: str
    created_at_ms: int
    updated_at_ms: int
    removed_at_ms: int | None
    last_commit: str | None
    last_pull_at_ms: int | None
    last_report: dict[str, object] | None
