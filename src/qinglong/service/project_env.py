"""Project environments and secrets as the surfaces ask for them (`ql env`, `ql secret`, the
HTTP API; docs/controls/environments.md): list, set, remove and the history of a project's
environment, and the rotation of the secret key. A secret's value is in no view: views say
``"secret": true`` and the value's digest.

Built on demand over a database (``environments(services)``), like every use case here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from qinglong.errors import InvalidInput
from qinglong.keyring import SecretKey, key_from_environment, require
from qinglong.service.times import rfc3339
from qinglong.service.views.base import OptionalInstant, ViewModel, one_of
from qinglong.storage.project_env import (
    EnvActor,
    EnvRevision,
    EnvSetParams,
    ProjectEnvStore,
    Rotation,
)

if TYPE_CHECKING:
    from qinglong.service.container import Services

__all__ = ["EnvActor", "EnvChangeView", "EnvEntryView", "EnvRevisionView", "EnvView",
           "ProjectEnvironments", "RotationView", "environments"]

MAX_HISTORY = 1000


class EnvEntryView(ViewModel):
    name: str
    enabled: bool
    secret: bool
    description: str
    value: str | None  # a plain entry's value; never a secret's
    value_digest: str  # sha256:... (plain) or hmac-sha256:... (secret, keyed: reveals nothing)


class EnvView(ViewModel):
    project: str
    revision: int  # 0: never changed
    digest: str | None  # SHA-256 of each entry's name, enabled flag and value digest
    updated_by: str | None
    updated_at: OptionalInstant
    entries: list[EnvEntryView]


class EnvChangeView(EnvView):
    changed: bool  # False: the entry already was so (no revision was made)


class EnvRevisionView(ViewModel):
    project: str
    revision: int
    digest: str | None
    op: Annotated[str, one_of("set", "remove")]
    name: str
    fields: list[str]  # what a set changed: value, secret, enabled, description
    entries: int
    created_by: str | None
    created_at: OptionalInstant


class RotationView(ViewModel):
    from_key: str | None
    to_key: str
    resealed: int
    already: bool


def env_view(revision: EnvRevision) -> EnvView:
    return EnvView(
        project=revision.project_id, revision=revision.revision, digest=revision.digest,
        updated_by=revision.created_by, updated_at=rfc3339(revision.created_at_ms),
        entries=[EnvEntryView(name=e.name, enabled=e.enabled, secret=e.secret,
                              description=e.description,
                              value=None if e.secret else e.value,
                              value_digest=e.value_digest) for e in revision.entries])


def revision_view(revision: EnvRevision) -> EnvRevisionView:
    change: dict[str, Any] = dict(revision.change)
    return EnvRevisionView(
        project=revision.project_id, revision=revision.revision, digest=revision.digest,
        op=str(change.get("op", "set")), name=str(change.get("name", "")),
        fields=[str(f) for f in change.get("fields", [])], entries=revision.entry_count,
        created_by=revision.created_by, created_at=rfc3339(revision.created_at_ms))


class ProjectEnvironments:
    def __init__(self, store: ProjectEnvStore, *,
                 secret_key: Callable[[], SecretKey | None] = key_from_environment) -> None:
        self._store = store
        self._secret_key = secret_key

    def show(self, project: str) -> EnvView:
        return env_view(self._store.current(project))

    def set(self, project: str, name: str, actor: EnvActor, *, value: str | None = None,
            secret: bool | None = None, enabled: bool | None = None,
            description: str | None = None) -> EnvChangeView:
        """Set one entry; a secret's value is sealed with this process's key (needed only
        when a value is to be sealed)."""
        needs_key = secret is True or (value is not None and secret is None
                                       and self._is_secret(project, name))
        key = self._secret_key() if needs_key else None
        change = self._store.set(EnvSetParams(
            project_id=project, name=name, actor=actor, value=value, secret=secret,
            enabled=enabled, description=description, key=key))
        return env_view(change.revision).extended(EnvChangeView, changed=change.changed)

    def _is_secret(self, project: str, name: str) -> bool:
        return any(e.name == name and e.secret for e in self._store.current(project).entries)

    def remove(self, project: str, name: str, actor: EnvActor) -> EnvView:
        return env_view(self._store.remove(project, name, actor))

    def history(self, project: str, *, before: int | None = None,
                limit: int = 50) -> list[EnvRevisionView]:
        if not 1 <= limit <= MAX_HISTORY:
            raise InvalidInput("limit", f"must be between 1 and {MAX_HISTORY}")
        if before is not None and before < 1:
            raise InvalidInput("before", "must be a revision number (1 or more)")
        return [revision_view(r) for r in self._store.history(project, before, limit)]

    def rotate_key(self, old: SecretKey, new: SecretKey | None,
                   actor: EnvActor) -> RotationView:
        """Seal every secret again under ``new`` (this process's key when None)."""
        target = require(new if new is not None else self._secret_key(),
                         "rotating the secret key (the new key)")
        if target.key_id == old.key_id:
            raise InvalidInput("new-key-file", "the new key is the old key")
        done: Rotation = self._store.rotate(old, target, actor)
        return RotationView(from_key=done.from_key, to_key=done.to_key,
                            resealed=done.resealed, already=done.already)

    def key_id(self) -> str | None:
        """The id of the key this database's secrets are sealed under (None: no secret yet)."""
        return self._store.keyring_id()


def environments(services: Services, *,
                 secret_key: Callable[[], SecretKey | None] = key_from_environment,
                 ) -> ProjectEnvironments:
    """The project environments of the database ``services`` serve."""
    return ProjectEnvironments(ProjectEnvStore(services.stores.db), secret_key=secret_key)
