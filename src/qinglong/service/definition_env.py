"""Environment entries in definitions: plain values and secrets (docs/controls/apply.md).

A file gives each entry in one of three forms:

- ``NAME: value``: a **plain** value, stored as given; ``ql export`` writes it back as it is,
  so an export applied anywhere, in any environment, states the same value.
- ``NAME: {from_env: VARIABLE}``: a **secret**, read from the environment of ``ql apply``;
  when VARIABLE is not set, the value stored under NAME is kept (a new entry needs it).
- ``NAME: {secret: stored}``: the **secret** stored under NAME, kept as it is. This is how
  ``ql export`` writes a secret, whose value it never writes; it never reads the environment
  of ``ql apply``, and where nothing is stored under NAME the apply is refused, naming it.

Entries stored before entries had a kind, and entries set through the API, are secrets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from qinglong.domain.task import EnvEntry
from qinglong.errors import InvalidInput
from qinglong.service.definition_fields import FieldChange
from qinglong.service.definition_model import DesiredTask, EnvValue, Issues
from qinglong.service.env_changes import entry_changes

STORED = "stored"  # {secret: stored}
STORED_NOTE = ("written as {secret: stored} (ql apply keeps the value stored where it "
               "applies; another database needs {from_env: VARIABLE})")


def resolve_env(task: DesiredTask, stored: Mapping[str, EnvEntry], environ: Mapping[str, str],
                issues: Issues) -> list[EnvEntry] | None:
    """The task's entries with their values; None (problems reported) when one has none."""
    entries, ok = [], True
    for item in task.env:
        kept = stored.get(item.name)
        if item.value is not None:
            value: str | None = item.value
        elif item.from_env is not None:
            value = environ.get(item.from_env, kept.value if kept else None)
            if value is None:
                issues.add(item.where, task.field_name(f"env.{item.name}.from_env"),
                           f"${item.from_env} is not set in the environment of ql apply, "
                           f"and the task has no stored value for {item.name}")
        else:
            value = kept.value if kept else None
            if value is None:
                issues.add(item.where, task.field_name(f"env.{item.name}.secret"),
                           f"there is no stored value of {item.name} to keep (ql export never "
                           "writes a secret's value); give it as {from_env: VARIABLE} to read "
                           "it from the environment of ql apply")
        if value is None:
            ok = False
            continue
        try:
            entries.append(EnvEntry(name=item.name, value=value, plain=item.value is not None))
        except InvalidInput as exc:
            issues.add(item.where, task.field_name(f"env.{item.name}"), exc.rule)
            ok = False
    return entries if ok else None


def env_field_changes(before: Iterable[EnvEntry], after: Iterable[EnvEntry]
                      ) -> list[FieldChange]:
    """The plan's lines for the environment: ``env.NAME: (set) -> (changed)`` and so on."""
    return [FieldChange(f"env.{name}", was, now)
            for name, was, now in entry_changes(before, after, name_secrets=True)]


def exported_env(entries: Iterable[EnvEntry]) -> tuple[tuple[EnvValue, ...], list[str]]:
    """The entries as a file states them (plain values as they are, secrets as
    ``{secret: stored}``), and the names of the secrets."""
    values, secrets = [], []
    for entry in entries:
        if entry.plain:
            values.append(EnvValue(name=entry.name, value=entry.value))
        else:
            values.append(EnvValue(name=entry.name))
            secrets.append(entry.name)
    return tuple(values), secrets
