"""The HTTP API fuzzed from its own OpenAPI document (schemathesis), against a real server
process: every operation the document lists (whatever routes it has today: nothing here names
one), requests generated from its parameters and body schema -- valid ones (positive) and ones
the document forbids (negative) -- sent with a token, and every answer checked:

- no 5xx;
- the status is one the document lists for the operation, the content type is one it lists
  for that status, and a JSON body matches its schema (schemathesis' own checks);
- a request the document forbids is refused with a 4xx (schemathesis' negative check);
- every 4xx is a problem object (application/problem+json: type, title, status, detail and a
  code of qinglong.errors, type = urn:qinglong:error:CODE, status = the HTTP status, and the
  field for bad input);
- a refused write (any 4xx to a POST, PUT, PATCH or DELETE) leaves the database as it was
  (test_api_support.snapshot before and after; ``quiet_tables`` leaves out what a serving
  process's own loops write meanwhile);
- as a viewer, every write route above read scope is refused with 403 QL_FORBIDDEN (and
  writes nothing).

The servers run with ``loopback_only`` on their PYTHONPATH and a git that speaks file:// only,
so a fuzzed webhook URL, SMTP host or Git remote never sends anything off this machine.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as fixed_seed
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from qinglong.clock import SystemClock
from qinglong.errors import QinglongError
from qinglong.service.accounts import Accounts
from tests.support.test_api_support import (
    PASSWORD,
    Auth,
    Database,
    Http,
    Server,
    dead_delivery,
    open_accounts,
    seed,
    seed_notify,
    snapshot,
    start_server,
    wait_for_status,
)

SCHEMA_CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
                 response_schema_conformance, negative_data_rejection]
GUARD = Path(__file__).parent / "loopback_only"
WRITES = ("POST", "PUT", "PATCH", "DELETE")
PROBLEM_FIELDS = {"type", "title", "status", "detail", "code"}
REQUEST_TIMEOUT_S = 60


def error_codes() -> set[str]:
    """Every stable code of qinglong's error hierarchy."""
    found, todo = set(), [QinglongError]
    while todo:
        kind = todo.pop()
        found.add(kind.code)
        todo.extend(kind.__subclasses__())
    return found


def guarded_env(tmp_path: Path) -> dict[str, str]:
    """What a fuzzed server's environment adds: the loopback guard for Python, and first on
    PATH a git that may use file:// only (a pull task's clone of a fuzzed remote fails
    without a look-up)."""
    real = shutil.which("git")
    shims = tmp_path / "shims"
    shims.mkdir(exist_ok=True)
    if real is not None:
        shim = shims / "git"
        shim.write_text(f"#!/bin/sh\nexec {real} -c protocol.allow=never "
                        "-c protocol.file.allow=always \"$@\"\n")
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    python_path = os.pathsep.join(p for p in (str(GUARD), os.environ.get("PYTHONPATH")) if p)
    return {"PYTHONPATH": python_path, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
            "no_proxy": "", "http_proxy": "http://127.0.0.1:9", "https_proxy":
            "http://127.0.0.1:9", "PIP_NO_INDEX": "1"}


def start_guarded(args: list[str], tmp_path: Path, name: str) -> Server:
    """``ql ARGS`` with the guard, in a folder of its own (where a Run's command runs when its
    task names no working directory); as root, commands run as nobody (``--run-as``)."""
    home = tmp_path / "cwd"
    home.mkdir(exist_ok=True)
    if args[0] == "serve" and os.geteuid() == 0:
        args = [*args, "--run-as", "nobody"]
    return start_server(args, tmp_path / f"{name}.log", env=guarded_env(tmp_path), cwd=home)


ENDED = {"succeeded", "failed", "cancelled", "timed_out", "lost"}


def seed_world(http: Http, admin: Auth, db: Database, accounts_url: str) -> dict[str, str]:
    """One record of each kind a path can name, every Run ended (so the database is still
    unless a request writes): path parameter -> the record's id."""
    world = seed(http, admin)
    seed_notify(http, admin)
    base = "/api/v1/projects/demo"
    http.ok("POST", f"{base}/flows/greet/revisions", admin, {"nodes": {"first": "hello"}}, 201)
    flow_run = http.ok("POST", f"{base}/flows/greet/run", admin, {}, 201)["id"]
    # cancelled, or already ended: its one node may run and succeed before the cancel arrives
    http.ok("POST", f"/api/v1/flow-runs/{flow_run}/cancel", admin, {}, (200, 409))
    http.ok("PUT", f"{base}/environment/REGION", admin, {"value": "eu"})
    http.ok("POST", f"{base}/repos", admin, {"name": "jd", "url": "/nowhere/jd.git"}, 201)
    for run in http.ok("GET", "/api/v1/runs?limit=1000", admin)["items"]:
        http.call("POST", f"/api/v1/runs/{run['id']}/cancel", auth=admin, body={})
        wait_for_status(http, admin, run["id"], ENDED)
    accounts, close = open_accounts(accounts_url, SystemClock())
    try:
        token = made_target(accounts)
    finally:
        close()
    return {"project": "demo", "task": "hello", "trigger": "yearly", "run": world.run_id,
            "flow": "greet", "flow_run": flow_run, "channel": "ops", "variable": "REGION",
            "repo": "jd", "delivery": dead_delivery(db, "ops"), "username": "target",
            "token": token}


def made_target(accounts: Accounts) -> str:
    """A user the fuzzed writes may change and a token they may revoke (never the admin who
    sends them): the token's id."""
    accounts.user_create("target", "operator", PASSWORD)
    return accounts.token_create("target", name="target", scope="operate", lifetime_ms=None).id


@dataclass
class Target:
    """A fuzzed server: its client, its document, its database, the records that exist
    (path parameter -> a value that names one) and the tables its own loops may write."""

    http: Http
    document: dict[str, Any]
    db: Database
    existing: dict[str, str]
    quiet_tables: Callable[[str], bool] = lambda table: True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http.port}"

    def state(self) -> dict[str, list[str]]:
        return snapshot(self.db.query)

    def __post_init__(self) -> None:
        self._known: dict[str, list[str]] | None = None

    def before_write(self) -> dict[str, list[str]]:
        """The state before a write: the last one read, unless a request may have changed it
        since (only the API writes the quiet tables)."""
        if self._known is None:
            self._known = self.state()
        return self._known

    def after_write(self, refused: bool) -> dict[str, list[str]] | None:
        """The state after a refused write (None after one that was not refused: changed)."""
        self._known = self.state() if refused else None
        return self._known


@dataclass
class Tally:
    """What a run sent and what it found: cases, answers by status, and failures (at most
    a few examples of each operation and check)."""

    cases: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: dict[str, list[str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def fail(self, key: str, text: str) -> None:
        examples = self.failures.setdefault(key, [])
        if len(examples) < 2:
            examples.append(text[:3000])

    def report(self) -> str:
        return "\n\n".join(f"== {key}\n" + "\n--\n".join(texts)
                           for key, texts in sorted(self.failures.items()))


def problem_failure(status: int, headers: dict[str, list[str]], raw: bytes,
                    codes: set[str]) -> str | None:
    """Why an error answer is not a problem object of ours (None: it is one)."""
    media = (headers.get("content-type") or [""])[0]
    if not media.startswith("application/problem+json"):
        return f"content type {media!r}, not application/problem+json"
    try:
        body = json.loads(raw)
    except ValueError:
        return f"not JSON: {raw[:200]!r}"
    if not isinstance(body, dict) or not PROBLEM_FIELDS <= set(body):
        return f"not a problem object: {raw[:300]!r}"
    if body["status"] != status:
        return f"status {body['status']!r} in the body, {status} on the wire"
    if body["code"] not in codes:
        return f"code {body['code']!r} is not one of qinglong.errors"
    if body["type"] != f"urn:qinglong:error:{body['code']}":
        return f"type {body['type']!r} does not name its code"
    if body["code"] == "QL_INVALID_INPUT" and not body.get("field"):
        return "bad input that names no field"
    return None


class Fuzz:
    """Sends generated cases of every operation of ``target``'s document as ``auth``."""

    def __init__(self, target: Target, *, examples: int, seed: int = 23) -> None:
        self.target = target
        self.examples = examples
        self.seed = seed
        self.schema = schemathesis.openapi.from_dict(target.document)
        self.codes = error_codes()
        self.tally = Tally()

    def operations(self) -> list[Any]:
        found = [result.ok() for result in self.schema.get_all_operations()]
        listed = sum(len(ops) for ops in self.target.document["paths"].values())
        assert len(found) == listed, (len(found), listed)
        return found

    def strategies(self, operation: Any) -> list[tuple[str, Any]]:
        """Valid cases (half of them on records that exist, when the path names any) and
        cases the document forbids."""
        positive = operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
        names = [p.name for p in operation.path_parameters]
        if names and all(name in self.target.existing for name in names):
            existing = operation.as_strategy(
                generation_mode=GenerationMode.POSITIVE,
                path_parameters={name: self.target.existing[name] for name in names})
            positive = st.one_of(existing, positive)
        return [("positive", positive),
                ("negative", operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))]

    def run(self, auth: Auth, *, writes_only: bool = False, examples: int | None = None,
            refused: Callable[[dict[str, Any]], int | None] = lambda op: None,
            skip: Callable[[str, str], bool] = lambda method, path: False) -> Tally:
        """Every operation (only the writes with ``writes_only``), ``examples`` cases of each
        (default: the run's); ``refused(operation)`` is the status every case must get (None:
        any the document allows)."""
        for operation in self.operations():
            method, path = operation.method.upper(), operation.path
            if (writes_only and method not in WRITES) or skip(method, path):
                continue
            spec = self.target.document["paths"][path][method.lower()]
            modes = self.strategies(operation)
            if writes_only:
                modes = modes[:1]
            for mode, strategy in modes:
                self._examples(operation, mode, strategy, auth, refused(spec),
                               examples or self.examples)
        return self.tally

    def _examples(self, operation: Any, mode: str, strategy: Any, auth: Auth,
                  wanted: int | None, examples: int) -> None:
        @fixed_seed(self.seed)
        @settings(max_examples=examples, database=None,
                  deadline=None, phases=[Phase.explicit, Phase.generate], print_blob=False,
                  suppress_health_check=list(HealthCheck))
        @given(case=strategy)
        def send(case: Case) -> None:
            self._send(case, operation, mode, auth, wanted)

        started = time.monotonic()
        try:
            send()
        except Unsatisfiable:
            assert mode == "negative", operation.label  # nothing the document could forbid
        self.tally.seconds[f"{operation.label} [{mode}, {auth.label}]"] = time.monotonic() - started

    def _send(self, case: Case, operation: Any, mode: str, auth: Auth,
              wanted: int | None) -> None:
        case.cookies = {}  # the token authenticates (a generated session cookie is ignored)
        writes = operation.method.upper() in WRITES
        before = self.target.before_write() if writes else None
        response = case.call(base_url=self.target.base_url, headers=auth.headers(),
                             timeout=REQUEST_TIMEOUT_S)
        tally, status = self.tally, response.status_code
        tally.cases += 1
        tally.statuses[status] += 1
        label = f"{operation.label} [{mode}, {auth.label}]"
        curl = case.as_curl_command(headers=auth.headers())
        try:
            case.validate_response(response, checks=SCHEMA_CHECKS)
        except FailureGroup as exc:  # its message says which checks failed, with a curl
            tally.fail(f"{label}: schema", str(exc))
        if wanted is not None and status != wanted:
            tally.fail(f"{label}: refusal", f"{status} (not {wanted}): "
                                            f"{response.content[:300]!r}\n{curl}")
        if status >= 400:
            why = problem_failure(status, response.headers, response.content, self.codes)
            if why is not None:
                tally.fail(f"{label}: problem", f"{status}: {why}\n{curl}")
        after = self.target.after_write(400 <= status < 500) if writes else None
        if before is not None and after is not None:
            changed = sorted(t for t in after
                             if after[t] != before[t] and self.target.quiet_tables(t))
            if changed:
                tally.fail(f"{label}: wrote", f"{status} yet changed {changed}: "
                                              f"{response.content[:300]!r}\n{curl}")
