"""The subscription store: the Git repositories a project pulls scripts from, and what the
latest pull of each found (docs/subscriptions.md). Written once over the kernel."""

from __future__ import annotations

import json

from qinglong.domain.identifiers import actor_name
from qinglong.domain.repos import Repo, RepoSpec, check_repo_name
from qinglong.errors import Conflict, NotFound, RecordCorrupt
from qinglong.storage.dbapi import Row
from qinglong.storage.kernel import Database, Tx
from qinglong.storage.records import json_object


def _repo(row: Row) -> Repo:
    what = f"subscription {row['project_id']}/{row['name']}"
    try:
        spec = RepoSpec.from_json(json_object(row["spec_json"], what))
    except (KeyError, ValueError, TypeError) as exc:
        raise RecordCorrupt(f"{what}: its stored spec is unreadable ({exc})") from None
    report = row["last_report_json"]
    return Repo(project_id=str(row["project_id"]), name=str(row["name"]), spec=spec,
                created_by=str(row["created_by"]), created_at_ms=int(row["created_at_ms"]),
                updated_at_ms=int(row["updated_at_ms"]),
                removed_at_ms=None if row["removed_at_ms"] is None
                else int(row["removed_at_ms"]),
                last_commit=None if row["last_commit"] is None else str(row["last_commit"]),
                last_pull_at_ms=None if row["last_pull_at_ms"] is None
                else int(row["last_pull_at_ms"]),
                last_report=None if report is None else json_object(report, what))


def _project(tx: Tx, project_id: str) -> None:
    row = tx.one("script_project", {"project_id": project_id})
    if row is None:
        raise NotFound("project", project_id)
    if row["status"] != "active":
        raise Conflict(f"project {project_id!r} is archived: unarchive it to change its "
                       "subscriptions")


class RepoStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def put(self, project_id: str, name: str, spec: RepoSpec, actor: str, *,
            create: bool) -> tuple[Repo, bool]:
        """Add a subscription (``create``: refused if one of that name is live) or change
        one; the row and whether it was new."""
        check_repo_name(name)
        text = json.dumps(spec.to_json(), sort_keys=True)

        def work(tx: Tx) -> tuple[Repo, bool]:
            _project(tx, project_id)
            key = {"project_id": project_id, "name": name}
            found = tx.one("repo_get", key)
            now = tx.now_ms()
            if found is None:
                tx.execute("repo_insert", {**key, "spec_json": text, "now_ms": now,
                                           "created_by": actor_name(actor)})
            elif create and found["removed_at_ms"] is None:
                raise Conflict(f"subscription {name!r} exists already (ql repo show)")
            else:
                tx.execute("repo_update", {**key, "spec_json": text, "now_ms": now})
            row = tx.one("repo_get", key)
            assert row is not None
            return _repo(row), found is None or found["removed_at_ms"] is not None

        return self._db.write("repo put", work)

    def get(self, project_id: str, name: str) -> Repo:
        def work(tx: Tx) -> Repo:
            row = tx.one("repo_get", {"project_id": project_id, "name": name})
            if row is None or row["removed_at_ms"] is not None:
                raise NotFound("subscription", name)
            return _repo(row)

        return self._db.read("repo get", work)

    def listing(self, project_id: str, removed: bool = False) -> list[Repo]:
        def work(tx: Tx) -> list[Repo]:
            if tx.one("script_project", {"project_id": project_id}) is None:
                raise NotFound("project", project_id)
            return [_repo(r) for r in tx.all("repo_list", {"project_id": project_id,
                                                            "removed": removed})]

        return self._db.read("repo list", work)

    def remove(self, project_id: str, name: str) -> Repo:
        def work(tx: Tx) -> Repo:
            _project(tx, project_id)
            key = {"project_id": project_id, "name": name}
            if tx.execute("repo_remove", {**key, "now_ms": tx.now_ms()}).rowcount != 1:
                raise NotFound("subscription", name)
            row = tx.one("repo_get", key)
            assert row is not None
            return _repo(row)

        return self._db.write("repo remove", work)

    def pulled(self, project_id: str, name: str, commit: str, report: dict[str, object]) -> None:
        """Record what a pull found (in the pull's own transaction when there is one)."""
        self._db.write("repo pulled", lambda tx: tx.execute("repo_pulled", {
            "project_id": project_id, "name": name, "commit": commit,
            "report_json": json.dumps(report, sort_keys=True), "now_ms": tx.now_ms()}))
