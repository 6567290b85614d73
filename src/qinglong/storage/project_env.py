"""The project environment store (docs/controls/environments.md): every change a new
immutable revision of the project's whole environment, written with its audit entry in one
transaction; secrets sealed with the keyring (qinglong/keyring.py) under the database's one
current key, their digests keyed by the database's digest key (kept sealed in
``secret_keyring``); and the rotation of that key.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from qinglong import keyring
from qinglong.domain import project_env as pe
from qinglong.domain.identifiers import actor_name, project_id
from qinglong.domain.project_env import LeasedEnvironment, LeasedVariable, StoredVariable
from qinglong.errors import InvalidInput, NotFound, SecretKeyMismatch
from qinglong.keyring import SecretKey
from qinglong.storage.kernel import Database, Tx

DIGEST_KEY_CONTEXT = b"qinglong digest key"
SEAL_OVERHEAD = 12 + 16  # nonce and tag


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvActor:
    """Who makes a change, as the audit log records it."""

    username: str
    via: str  # "cli", "session" or "token"
    token_id: str | None = None
    client: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvSetParams:
    """Set one entry; a field left None keeps what the entry has (a new entry: its value is
    needed, it is plain, enabled and undescribed)."""

    project_id: str
    name: str
    actor: EnvActor
    value: str | None = None
    secret: bool | None = None
    enabled: bool | None = None
    description: str | None = None
    key: SecretKey | None = None  # needed to seal a secret value


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvRevision:
    project_id: str
    revision: int  # 0: no change was ever made
    digest: str | None
    change: Mapping[str, Any]
    created_by: str | None
    created_at_ms: int | None
    entries: tuple[StoredVariable, ...] = ()
    entry_count: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvChange:
    revision: EnvRevision
    changed: bool  # False: the entry already was so, no revision was made


@dataclass(frozen=True, slots=True, kw_only=True)
class Rotation:
    from_key: str | None
    to_key: str
    resealed: int
    already: bool = False  # the secrets already were under the new key


def _context(project: str, name: str) -> bytes:
    return f"qinglong env\x00{project}\x00{name}".encode()


def _variable(row: Mapping[str, Any]) -> StoredVariable:
    return StoredVariable(name=row["name"], enabled=bool(row["enabled"]),
                          secret=bool(row["secret"]), description=row["description"],
                          value_digest=row["value_digest"], value=row["value"],
                          sealed=row["sealed"], key_id=row["key_id"])


def _size(entry: StoredVariable) -> int:
    if entry.value is not None:
        return len(entry.value.encode("utf-8"))
    return max(0, len(entry.sealed or "") * 3 // 4 - SEAL_OVERHEAD)


def _change_json(change: Any) -> dict[str, Any]:
    return dict(json.loads(change) if isinstance(change, str) else change)


def leased_environment(tx: Tx, project: str) -> LeasedEnvironment | None:
    """The project's environment as a lease carries it: its latest revision's enabled
    entries (sealed secrets stay sealed); None before its first change."""
    rows = tx.all("project_env_lease", {"project_id": project})
    if not rows:
        return None
    return LeasedEnvironment(
        project_id=project, revision=int(rows[0]["revision"]), digest=rows[0]["digest"],
        variables=tuple(LeasedVariable(name=r["name"], value=r["value"], sealed=r["sealed"],
                                       key_id=r["key_id"])
                        for r in rows if r["name"] is not None))


def record_leased(tx: Tx, attempt_id: str, environment: LeasedEnvironment) -> None:
    tx.execute("attempt_environment_record", {"attempt_id": attempt_id,
                                              "revision": environment.revision,
                                              "digest": environment.digest})


@dataclass
class ProjectEnvStore:
    db: Database

    # -- reads ---------------------------------------------------------------------------

    def current(self, project: str) -> EnvRevision:
        return self.db.read("read a project's environment", lambda tx: self._current(tx, project))

    def history(self, project: str, before: int | None, limit: int) -> list[EnvRevision]:
        def work(tx: Tx) -> list[EnvRevision]:
            self._project(tx, project)
            return [EnvRevision(project_id=project, revision=int(r["revision"]),
                                digest=r["digest"], change=_change_json(r["change"]),
                                created_by=r["created_by"], created_at_ms=int(r["created_at_ms"]),
                                entry_count=int(r["entries"]))
                    for r in tx.all("project_env_history", {"project_id": project,
                                                            "before": before, "limit": limit})]
        return self.db.read("read a project's environment history", work)

    def keyring_id(self) -> str | None:
        row = self.db.read("read the keyring", lambda tx: tx.one("secret_keyring_get"))
        return None if row is None else str(row["key_id"])

    def _project(self, tx: Tx, project: str) -> None:
        project_id(project)
        if tx.one("project_env_project", {"project_id": project}) is None:
            raise NotFound("project", project)

    def _current(self, tx: Tx, project: str) -> EnvRevision:
        self._project(tx, project)
        head = tx.one("project_env_head", {"project_id": project})
        if head is None:
            return EnvRevision(project_id=project, revision=0, digest=None, change={},
                               created_by=None, created_at_ms=None)
        entries = tuple(_variable(r) for r in tx.all("project_env_entries", {
            "project_id": project, "revision": int(head["revision"])}))
        return EnvRevision(project_id=project, revision=int(head["revision"]),
                           digest=head["digest"], change=_change_json(head["change"]),
                           created_by=head["created_by"],
                           created_at_ms=int(head["created_at_ms"]), entries=entries,
                           entry_count=len(entries))

    # -- changes -------------------------------------------------------------------------

    def set(self, params: EnvSetParams) -> EnvChange:
        pe.variable_name(params.name)
        if params.value is not None:
            pe.variable_value(params.value)
        if params.description is not None:
            pe.description_text(params.description)
        actor_name(params.actor.username)
        return self.db.write("set a project environment entry", lambda tx: self._set(tx, params))

    def _set(self, tx: Tx, params: EnvSetParams) -> EnvChange:
        project, name = params.project_id, params.name
        current = self._current(tx, project)
        entries = {e.name: e for e in current.entries}
        old = entries.get(name)
        secret = params.secret if params.secret is not None else bool(old and old.secret)
        enabled = params.enabled if params.enabled is not None else (old is None or old.enabled)
        description = params.description if params.description is not None else (
            "" if old is None else old.description)
        text = params.value
        if text is None:
            if old is None:
                raise InvalidInput("value", f"{name} is a new entry: give its value")
            if old.secret and not secret:
                raise InvalidInput("value", "a secret is never read back: give the value "
                                            "again to make it plain")
            if not old.secret and secret:
                text = old.value
        if text is None:
            assert old is not None
            new = replace(old, enabled=enabled, secret=secret, description=description)
        elif secret:
            key, digest_key = self._sealing_key(tx, params.key)
            digest = pe.SECRET_DIGEST + keyring.keyed_digest(
                digest_key, pe.digest_message(project, name, text))
            if old is not None and old.secret and old.value_digest == digest:
                sealed, key_id = old.sealed, old.key_id  # the same value: nothing to seal
            else:
                sealed, key_id = keyring.seal(key, text.encode(), _context(project, name)), \
                    key.key_id
            new = StoredVariable(name=name, enabled=enabled, secret=True,
                                 description=description, value_digest=digest, sealed=sealed,
                                 key_id=key_id)
        else:
            new = StoredVariable(name=name, enabled=enabled, secret=False,
                                 description=description, value=text,
                                 value_digest=pe.plain_digest(project, name, text))
        if old is not None and old.same_content(new):
            return EnvChange(revision=current, changed=False)
        fields = ["value", "secret", "enabled", "description"] if old is None else [
            f for f, a, b in (("value", old.value_digest, new.value_digest),
                              ("secret", old.secret, new.secret),
                              ("enabled", old.enabled, new.enabled),
                              ("description", old.description, new.description)) if a != b]
        entries[name] = new
        change = {"op": "set", "name": name, "created": old is None, "fields": fields,
                  "secret": new.secret}
        revision = self._append(tx, current, list(entries.values()), change, params.actor)
        return EnvChange(revision=revision, changed=True)

    def remove(self, project: str, name: str, actor: EnvActor) -> EnvRevision:
        pe.variable_name(name)

        def work(tx: Tx) -> EnvRevision:
            current = self._current(tx, project)
            kept = [e for e in current.entries if e.name != name]
            if len(kept) == len(current.entries):
                raise NotFound("environment entry", f"{project}/{name}")
            return self._append(tx, current, kept, {"op": "remove", "name": name}, actor)
        return self.db.write("remove a project environment entry", work)

    def _append(self, tx: Tx, current: EnvRevision, entries: list[StoredVariable],
                change: dict[str, Any], actor: EnvActor) -> EnvRevision:
        pe.check_revision(entries)
        pe.check_total([_size(e) for e in entries])
        project, number = current.project_id, current.revision + 1
        digest = pe.revision_digest(entries)
        now_ms = tx.now_ms()
        tx.execute("project_env_revision_insert", {
            "project_id": project, "revision": number, "digest": digest,
            "change": json.dumps(change, sort_keys=True), "actor": actor.username,
            "now_ms": now_ms})
        tx.execute_many("project_env_entry_insert", [{
            "project_id": project, "revision": number, "name": e.name, "enabled": e.enabled,
            "secret": e.secret, "description": e.description, "value_digest": e.value_digest,
            "value": e.value, "sealed": e.sealed, "key_id": e.key_id} for e in entries])
        action = "project.env.set" if change["op"] == "set" else "project.env.remove"
        self._audit(tx, actor, action, project, f"environment {change['name']}",
                    {**change, "revision": number, "digest": digest}, now_ms)
        ordered = tuple(sorted(entries, key=lambda e: e.name))
        return EnvRevision(project_id=project, revision=number, digest=digest, change=change,
                           created_by=actor.username, created_at_ms=now_ms, entries=ordered,
                           entry_count=len(ordered))

    def _audit(self, tx: Tx, actor: EnvActor, action: str, project: str | None,
               target: str, detail: Mapping[str, object], now_ms: int) -> None:
        tx.execute("project_env_audit", {
            "now_ms": now_ms, "actor": actor.username[:64], "via": actor.via,
            "token_id": actor.token_id, "action": action, "project_id": project,
            "target": target, "detail": json.dumps(dict(detail), sort_keys=True,
                                                   separators=(",", ":")),
            "client": actor.client})

    def _sealing_key(self, tx: Tx, given: SecretKey | None) -> tuple[SecretKey, bytes]:
        """The key to seal with (the database's current one) and the digest key; the
        keyring is made at the first secret."""
        key = keyring.require(given, "setting a secret")
        row = tx.one("secret_keyring_get")
        if row is None:
            digest_key = os.urandom(32)
            tx.execute("secret_keyring_insert", {
                "key_id": key.key_id, "now_ms": tx.now_ms(),
                "digest_key": keyring.seal(key, digest_key, DIGEST_KEY_CONTEXT)})
            return key, digest_key
        if row["key_id"] != key.key_id:
            raise SecretKeyMismatch(keyring.KEY_ENV, f"this database's secrets are sealed under "
                                                     f"key {row['key_id']}, and this process "
                                                     f"has key {key.key_id}")
        return key, keyring.open_sealed(key, row["key_id"], row["digest_key"],
                                        DIGEST_KEY_CONTEXT, "the digest key")

    # -- the key ---------------------------------------------------------------------------

    def rotate(self, old: SecretKey, new: SecretKey, actor: EnvActor) -> Rotation:
        """Seal every secret of every revision (and the digest key) again under ``new``: one
        transaction, so the database is under one key before and after."""
        def work(tx: Tx) -> Rotation:
            row = tx.one("secret_keyring_get")
            if row is None:
                return Rotation(from_key=None, to_key=new.key_id, resealed=0, already=True)
            if row["key_id"] == new.key_id:
                return Rotation(from_key=new.key_id, to_key=new.key_id, resealed=0,
                                already=True)
            if row["key_id"] != old.key_id:
                raise SecretKeyMismatch("old-key-file", f"the secrets are sealed under key "
                                                        f"{row['key_id']}, not {old.key_id}")
            digest_key = keyring.open_sealed(old, row["key_id"], row["digest_key"],
                                             DIGEST_KEY_CONTEXT, "the digest key")
            count = 0
            for value in tx.all("project_env_sealed_all"):
                where = f"{value['project_id']}/{value['name']} (revision {value['revision']})"
                context = _context(value["project_id"], value["name"])
                plain = keyring.open_sealed(old, value["key_id"], value["sealed"], context, where)
                tx.execute("project_env_reseal", {
                    "project_id": value["project_id"], "revision": value["revision"],
                    "name": value["name"], "key_id": new.key_id,
                    "sealed": keyring.seal(new, plain, context)})
                count += 1
            now_ms = tx.now_ms()
            tx.execute("secret_keyring_update", {
                "key_id": new.key_id, "old_key_id": old.key_id, "now_ms": now_ms,
                "digest_key": keyring.seal(new, digest_key, DIGEST_KEY_CONTEXT)})
            self._audit(tx, actor, "secret.rotate-key", None, "secret key",
                        {"from": old.key_id, "to": new.key_id, "values": count}, now_ms)
            return Rotation(from_key=old.key_id, to_key=new.key_id, resealed=count)
        return self.db.write("rotate the secret key", work)
