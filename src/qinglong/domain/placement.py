"""Placement: the labels a worker offers and the requirements a task makes of them.

A worker is started with labels (``ql worker --labels region=eu,gpu``): each a key, or a key
with a value. A task requires labels (``--requires region=eu --requires gpu``): a
requirement ``key=value`` is met by a worker whose label ``key`` has that value, a bare
``key`` by a worker that has the label ``key`` with any value or none. A Run is leased only
by a worker that meets every requirement of its task (docs/placement.md).

Both sides are written as tokens so that a database can compare them as sets: a requirement
is its own token (``region=eu`` or ``gpu``), and a worker's labels expand to every token they
meet (``region=eu`` gives ``region`` and ``region=eu``). A Run may be leased when its tokens
are a subset of the worker's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from qinglong.errors import InvalidInput

LABEL_KEY = re.compile(r"^[a-z0-9](?:[a-z0-9._/-]{0,61}[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
MAX_LABELS = 32
MAX_REQUIREMENTS = 16
LABEL_RULE = (
    "a label is KEY or KEY=VALUE: a key of 1-63 lowercase letters, digits, '.', '_', '/' and "
    "'-' (starting and ending with a letter or digit), a value of 1-63 letters, digits, '.', "
    "'_' and '-' (likewise)"
)


def _token(text: object, field: str) -> tuple[str, str | None]:
    if not isinstance(text, str):
        raise InvalidInput(field, LABEL_RULE)
    key, sep, value = text.strip().partition("=")
    if not LABEL_KEY.fullmatch(key) or (sep and not LABEL_VALUE.fullmatch(value)):
        raise InvalidInput(field, f"{text!r}: {LABEL_RULE}")
    return key, (value if sep else None)


def _keyed(parts: Iterable[object], field: str, limit: int, twice: str,
           what: str) -> dict[str, str | None]:
    """Tokens by key, each key once (``twice`` names the refusal), at most ``limit``."""
    found: dict[str, str | None] = {}
    for part in parts:
        key, value = _token(part, field)
        if key in found:
            raise InvalidInput(field, twice.format(key=key))
        found[key] = value
    if len(found) > limit:
        raise InvalidInput(field, f"at most {limit} {what}")
    return found


def _text(key: str, value: str | None) -> str:
    return key if value is None else f"{key}={value}"


def parse_labels(items: Iterable[str], field: str = "labels") -> dict[str, str | None]:
    """A worker's labels from ``KEY[=VALUE]`` items (each may hold several, comma-separated):
    a key given twice is an error, even with the same value."""
    parts: list[str] = []
    for item in items:
        for part in item.split(","):
            if not part.strip():
                raise InvalidInput(field, f"{item!r} has an empty label")
            parts.append(part)
    return _keyed(parts, field, MAX_LABELS, "label {key!r} is given more than once", "labels")


def label_tokens(labels: Mapping[str, str | None]) -> list[str]:
    """Every requirement token the labels meet, sorted: ``key`` for each label and
    ``key=value`` for each label with a value."""
    tokens = set(labels)
    tokens.update(_text(key, value) for key, value in labels.items() if value is not None)
    return sorted(tokens)


def labels_text(labels: Mapping[str, str | None]) -> str:
    """The labels as given on the command line (``region=eu,gpu``), or ``-`` for none."""
    return ",".join(_text(key, value) for key, value in sorted(labels.items())) or "-"


def parse_requirements(items: Iterable[object], field: str = "requires") -> tuple[str, ...]:
    """A task's requirements in canonical form: sorted, each once. Two requirements that no
    worker could meet together (two values for one key, or a key both bare and with a value,
    which says nothing more) are refused."""
    found = _keyed(items, field, MAX_REQUIREMENTS, "{key!r} is required more than once",
                   "requirements")
    return tuple(sorted(_text(key, value) for key, value in found.items()))


def check_canonical_requirements(value: object, field: str = "requires") -> tuple[str, ...]:
    """Stored requirements: a non-empty list already in canonical form."""
    if not isinstance(value, list) or not value:
        raise InvalidInput(field, "must be a non-empty list of labels (left out when none)")
    parsed = parse_requirements(value, field)
    if list(parsed) != value:
        raise InvalidInput(field, "is not in canonical form (sorted, each once)")
    return parsed


def unmet(requires: Iterable[str], labels: Mapping[str, str | None]) -> list[str]:
    """The requirements these labels do not meet (none: a worker with them may lease)."""
    offered = set(label_tokens(labels))
    return [token for token in requires if token not in offered]


def requirements_change(given: Iterable[str], clear: bool,
                        field: str = "requires") -> tuple[str, ...] | None:
    """What a publish does to a task's requirements: replace them with ``given`` (canonical),
    clear them (``()``), or keep them (None)."""
    items = list(given)
    if clear and items:
        raise InvalidInput(field, "give requirements or clear them, not both")
    if clear:
        return ()
    return parse_requirements(items, field) if items else None


def unplaceable(requires: Iterable[str], offers: Iterable[Mapping[str, str | None]]) -> str | None:
    """Why no executor can take a Run that requires these labels, given the labels each live
    executor offers; None when one can (or the Run requires nothing)."""
    wanted = list(requires)
    if not wanted or any(not unmet(wanted, labels) for labels in offers):
        return None
    return "no live worker offers " + ", ".join(wanted)
