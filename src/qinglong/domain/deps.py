"""A project's dependency set: the Python requirements and Node packages its scripts need
(issue 22, item 4; docs/dependencies.md).

A set is canonical: every specifier is checked and written one way (a Python name
normalised as PEP 503 says, no spaces), one specifier per package, sorted by package. Its
digest is the SHA-256 of that canonical form, so two sets that ask for the same things have
one digest, and a worker caches the environment it built for a set under its digest.

What a specifier may be is deliberately narrow: it is handed to ``pip install`` and ``npm
install`` as one argument of an argv list (never a shell line), and nothing that either tool
would read as an option (a leading ``-``), a URL of a remote source or a marker is accepted.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from qinglong.errors import InvalidInput

MAX_SPECS = 200  # per language
MAX_SPEC = 200  # characters
INSTALL_TASK = "deps-install"  # the task whose Runs install a project's set
DIGEST = re.compile(r"^[0-9a-f]{64}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PY_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_PY_VERSION = r"[A-Za-z0-9.*+!_-]+"
_PY_CLAUSE = rf"(?:===|==|!=|~=|<=|>=|<|>)\s*{_PY_VERSION}"
_PYTHON = re.compile(rf"^\s*({_PY_NAME})\s*(?:\[\s*({_PY_NAME}(?:\s*,\s*{_PY_NAME})*)\s*\])?"
                     rf"\s*({_PY_CLAUSE}(?:\s*,\s*{_PY_CLAUSE})*)?\s*$")
_NODE_NAME = r"(?:@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*"
_NODE = re.compile(rf"^({_NODE_NAME})(?:@(.+))?$")
_NODE_RANGE = re.compile(r"^[A-Za-z0-9.^~<>=|*+ -]+$")
_NODE_FILE = re.compile(r"^file:/[^\s\x00-\x1f\x7f]+$")  # a local tarball or folder
PYTHON_RULE = ("must be a requirement such as requests, requests==2.32.* or "
               "pkg[extra]>=1,<2 (no URL, marker or option)")
NODE_RULE = ("must be a package such as axios, axios@1, @scope/pkg@^2.1 or "
             "pkg@file:/abs/path.tgz (no URL, git source or option)")


def python_key(name: str) -> str:
    """A Python distribution's name as PEP 503 compares names."""
    return re.sub(r"[-_.]+", "-", name).lower()


def check_python(spec: object) -> tuple[str, str]:
    """A Python requirement specifier: (its package key, its canonical form)."""
    if not isinstance(spec, str) or len(spec) > MAX_SPEC or _CONTROL.search(spec):
        raise InvalidInput("python", PYTHON_RULE)
    found = _PYTHON.fullmatch(spec)
    if found is None:
        raise InvalidInput("python", f"{spec!r} {PYTHON_RULE}")
    name, extras, clauses = found.groups()
    key = python_key(name)
    text = key
    if extras:
        text += "[" + ",".join(sorted({python_key(e.strip()) for e in extras.split(",")})) + "]"
    if clauses:
        text += ",".join(re.sub(r"\s+", "", c) for c in clauses.split(","))
    return key, text


def check_node(spec: object) -> tuple[str, str]:
    """A Node package specifier: (its package name, its canonical form)."""
    if not isinstance(spec, str) or len(spec) > MAX_SPEC or _CONTROL.search(spec):
        raise InvalidInput("node", NODE_RULE)
    text = spec.strip()
    found = _NODE.fullmatch(text)
    if found is None:
        raise InvalidInput("node", f"{spec!r} {NODE_RULE}")
    name, version = found.groups()
    if version is None:
        return name, name
    version = version.strip()
    if not version or not (_NODE_RANGE.fullmatch(version) or _NODE_FILE.fullmatch(version)):
        raise InvalidInput("node", f"{spec!r} {NODE_RULE}")
    return name, f"{name}@{version}"


@dataclass(frozen=True, slots=True)
class DepSet:
    """What a project's scripts need: canonical specifiers, one per package, by package."""

    python: tuple[str, ...] = ()
    node: tuple[str, ...] = ()

    @classmethod
    def of(cls, python: Iterable[str] = (), node: Iterable[str] = ()) -> DepSet:
        """A set of these specifiers (a later one for a package replaces an earlier one)."""
        return cls().adding(python, node)

    def adding(self, python: Iterable[str] = (), node: Iterable[str] = ()) -> DepSet:
        """This set with these specifiers added (replacing the one of the same package)."""
        py = {check_python(s)[0]: s for s in self.python}
        nd = {check_node(s)[0]: s for s in self.node}
        for spec in python:
            key, text = check_python(spec)
            py[key] = text
        for spec in node:
            key, text = check_node(spec)
            nd[key] = text
        if len(py) > MAX_SPECS or len(nd) > MAX_SPECS:
            raise InvalidInput("deps", f"at most {MAX_SPECS} packages per language")
        return DepSet(python=tuple(py[k] for k in sorted(py)),
                      node=tuple(nd[k] for k in sorted(nd)))

    def removing(self, python: Iterable[str] = (), node: Iterable[str] = ()) -> DepSet:
        """This set without these packages (named by package, or by a specifier of one);
        InvalidInput names one the set does not have."""
        py = {check_python(s)[0]: s for s in self.python}
        nd = {check_node(s)[0]: s for s in self.node}
        for spec in python:
            key = check_python(spec)[0]
            if py.pop(key, None) is None:
                raise InvalidInput("python", f"the set has no Python package {key!r}")
        for spec in node:
            key = check_node(spec)[0]
            if nd.pop(key, None) is None:
                raise InvalidInput("node", f"the set has no Node package {key!r}")
        return DepSet(python=tuple(py[k] for k in sorted(py)),
                      node=tuple(nd[k] for k in sorted(nd)))

    @property
    def empty(self) -> bool:
        return not self.python and not self.node

    def to_json(self) -> dict[str, list[str]]:
        return {"node": list(self.node), "python": list(self.python)}

    @classmethod
    def from_json(cls, value: Mapping[str, object]) -> DepSet:
        python, node = value.get("python", []), value.get("node", [])
        if not isinstance(python, list) or not isinstance(node, list):
            raise InvalidInput("deps", "python and node must be lists of specifiers")
        found = cls.of(python, node)
        if list(found.python) != python or list(found.node) != node:
            raise InvalidInput("deps", "is not in its canonical form")
        return found

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical set: the key of its environment in a worker's cache."""
        return digest_of(self.python, self.node)


def digest_of(python: Iterable[str], node: Iterable[str]) -> str:
    """The digest of canonical specifier lists (what DepSet.digest is; the installer checks
    its arguments with it without importing more of qinglong)."""
    text = json.dumps({"node": list(node), "python": list(python)}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(b"qinglong/deps@v1\0" + text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class DepsRevision:
    """One change of a project's set: its number, the set after it, who and when."""

    project_id: str
    revision: int
    deps: DepSet
    digest: str
    actor: str
    created_at_ms: int

    def to_json(self) -> dict[str, object]:
        return {"project": self.project_id, "revision": self.revision, "digest": self.digest,
                **self.deps.to_json(), "actor": self.actor,
                "created_at_ms": self.created_at_ms}
