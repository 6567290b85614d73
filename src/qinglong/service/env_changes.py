"""How a change of a task's environment is shown: never a value, only that an entry was added,
removed or changed, and whether it is plain (``(set)``: ``ql export`` writes it) or a secret
(``(secret)``: nothing reads it back). A views' diff (the API, ``ql task diff``) names the kind
only when it changes, so an entry set through the API (a secret) still shows as ``(set)``; a
plan of ``ql apply`` names it always."""

from __future__ import annotations

from collections.abc import Iterable

from qinglong.domain.task import EnvEntry

SET, SECRET, CHANGED = "(set)", "(secret)", "(changed)"
LABELS = frozenset({SET, SECRET, CHANGED, "(set, changed)", "(secret, changed)"})


def _label(entry: EnvEntry, name_secrets: bool) -> str:
    return SECRET if name_secrets and not entry.plain else SET


def entry_changes(before: Iterable[EnvEntry], after: Iterable[EnvEntry], *,
                  name_secrets: bool) -> list[tuple[str, str | None, str | None]]:
    """(name, before, after) of each entry that differs, by name; None: not there."""
    old = {entry.name: entry for entry in before}
    new = {entry.name: entry for entry in after}
    changes: list[tuple[str, str | None, str | None]] = []
    for name in sorted(old.keys() | new.keys()):
        was, now = old.get(name), new.get(name)
        if was is None:
            assert now is not None
            changes.append((name, None, _label(now, name_secrets)))
        elif now is None:
            changes.append((name, _label(was, name_secrets), None))
        elif was.plain != now.plain:
            label = _label(now, True)
            if was.value != now.value:
                label = label[:-1] + ", changed)"
            changes.append((name, _label(was, True), label))
        elif was.value != now.value:
            changes.append((name, _label(was, name_secrets), CHANGED))
    return changes
