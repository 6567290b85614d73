"""YAML as definitions files are read: every mapping and list keeps the line of each item (so a
problem is reported as ``jobs.yaml:12: triggers.nightly.cron: ...``), keys given twice and
unbounded aliases are refused, and :class:`Fields` reads one mapping's keys with typed,
friendly errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date
from typing import Any, TypeVar

import yaml  # type: ignore[import-untyped, unused-ignore]

from qinglong.domain.durations import parse_duration_ms
from qinglong.domain.text import SURROGATE_RULE, has_lone_surrogate
from qinglong.errors import InvalidInput
from qinglong.service.definition_model import Issues, Where

T = TypeVar("T")

class YMap(dict[str, Any]):
    """A YAML mapping that remembers its own line, the line of each key, and the text of
    each plain scalar value that YAML read as something else than a string (``off``,
    ``8080``, ``0755``), for the fields that take text as written."""

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines: dict[str, int] = {}
        self.raw: dict[str, str] = {}

    def text(self, key: str) -> Any:
        """The value, or its text as written when it is a plain non-string scalar."""
        return self.raw.get(key, self.get(key))


class YList(list[Any]):
    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.item_lines: list[int] = []
        self.raw: dict[int, str] = {}

    def text(self, index: int) -> Any:
        return self.raw.get(index, self[index])


def _as_written(node: Any, value: object) -> str | None:
    """The text of a plain scalar that YAML resolved to a bool, a number or a timestamp."""
    if (isinstance(node, yaml.ScalarNode) and node.style is None
            and isinstance(value, bool | int | float | date)):
        return str(node.value)
    return None


MAX_NODES = 200_000  # aliases expand into copies: a bound on what one file may unfold to


class _TooLarge(Exception):
    pass


def _located(node: Any, constructor: Any, file: str, issues: Issues,
             path: tuple[int, ...] = (), budget: list[int] | None = None) -> Any:
    """``node`` as plain values, mappings as YMap and sequences as YList (with lines)."""
    budget = [MAX_NODES] if budget is None else budget
    budget[0] -= 1
    line = int(node.start_mark.line) + 1
    if budget[0] < 0:
        raise _TooLarge
    if id(node) in path:
        issues.add(Where(file, line), "", "an alias refers to a node that contains it")
        return None
    path = (*path, id(node))
    if isinstance(node, yaml.MappingNode):
        constructor.flatten_mapping(node)  # `<<: *anchor` merges
        mapping = YMap(line)
        for key_node, value_node in node.value:
            key_line = int(key_node.start_mark.line) + 1
            if not isinstance(key_node, yaml.ScalarNode):
                issues.add(Where(file, key_line), "", "a key must be a plain word")
                continue
            key = str(key_node.value)
            if has_lone_surrogate(key):
                issues.add(Where(file, key_line), "", f"a key {SURROGATE_RULE}")
                continue
            if key in mapping:
                issues.add(Where(file, key_line), key,
                           f"is given twice (first at line {mapping.key_lines[key]})")
                continue
            mapping[key] = _located(value_node, constructor, file, issues, path, budget)
            mapping.key_lines[key] = key_line
            written = _as_written(value_node, mapping[key])
            if written is not None:
                mapping.raw[key] = written
        return mapping
    if isinstance(node, yaml.SequenceNode):
        items = YList(line)
        for item in node.value:
            items.append(_located(item, constructor, file, issues, path, budget))
            items.item_lines.append(int(item.start_mark.line) + 1)
            written = _as_written(item, items[-1])
            if written is not None:
                items.raw[len(items) - 1] = written
        return items
    value = constructor.construct_object(node, deep=True)
    if isinstance(value, str) and has_lone_surrogate(value):  # "\ud800" in a quoted scalar
        issues.add(Where(file, line), "", f"a value {SURROGATE_RULE}")
        return None
    return value


def read_documents(text: str, file: str, issues: Issues) -> list[YMap]:
    """The YAML documents of one file, with lines; syntax errors go to ``issues``."""
    constructor = yaml.SafeLoader("")
    documents: list[YMap] = []
    try:
        for node in yaml.compose_all(text, Loader=yaml.SafeLoader):
            if node is None:
                continue  # an empty document (a trailing ---)
            value = _located(node, constructor, file, issues)
            if not isinstance(value, YMap):
                issues.add(Where(file, int(node.start_mark.line) + 1), "",
                           "a document must be a mapping (apiVersion, project, tasks, triggers)")
                continue
            documents.append(value)
    except yaml.MarkedYAMLError as exc:
        mark, context = exc.problem_mark, exc.context_mark
        if mark is None or (context is not None and mark.line >= len(text.splitlines())):
            mark = context  # the problem is the end of the file: name where it began
        detail = str(exc.problem or "")
        if exc.context and context is not None:
            detail += f" ({exc.context} at line {int(context.line) + 1})"
        where = Where(file, int(mark.line) + 1 if mark is not None else None)
        issues.add(where, "", f"not valid YAML: {detail}")
    except yaml.YAMLError as exc:
        issues.add(Where(file), "", f"not valid YAML: {exc}")
    except _TooLarge:
        issues.add(Where(file), "", f"unfolds to more than {MAX_NODES} values (aliases?)")
    return documents


# --- reading mappings with friendly type errors ------------------------------------------


def type_name(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


class Fields:
    """One mapping of the file: typed reads that report to ``issues`` with file and line."""

    def __init__(self, mapping: YMap, file: str, path: str, issues: Issues,
                 allowed: Sequence[str]) -> None:
        self.map = mapping
        self.file = file
        self.path = path
        self.issues = issues
        self.ok = True
        for key in mapping:
            if key not in allowed:
                self.fail(key, "unknown key (expected one of " + ", ".join(allowed) + ")")

    def where(self, key: str | None = None) -> Where:
        return Where(self.file, self.map.key_lines.get(key, self.map.line) if key else
                     self.map.line)

    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str, message: str, *, where: Where | None = None) -> None:
        self.ok = False
        self.issues.add(where or self.where(key), self.name(key), message)

    def attempt(self, key: str, make: Callable[[], T]) -> T | None:
        """``make()``, with a domain refusal reported at ``key``."""
        try:
            return make()
        except InvalidInput as exc:
            self.fail(key, exc.rule)
            return None

    def _typed(self, key: str, kind: type | tuple[type, ...], what: str) -> Any:
        value = self.map.get(key)
        if value is None:
            return None
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            self.fail(key, f"must be {what}, not true/false")
            return None
        if not isinstance(value, kind):
            hint = " (quote it)" if what == "a string" else ""
            self.fail(key, f"must be {what}, not {type_name(value)}{hint}")
            return None
        return value

    def text(self, key: str, *, required: bool = False) -> str | None:
        """A text field: a plain ``off``, ``true`` or ``8080`` is taken as written."""
        if key in self.map.raw:
            return self.map.raw[key]
        value = self._typed(key, str, "a string")
        if value is None and required and self.map.get(key) is None:
            self.fail(key, "is required", where=self.where(key if key in self.map else None))
        return value  # type: ignore[no-any-return]

    def flag(self, key: str, default: bool) -> bool:
        value = self._typed(key, bool, "true or false")
        return default if value is None else bool(value)

    def number(self, key: str) -> int | None:
        return self._typed(key, int, "an integer")  # type: ignore[no-any-return]

    def duration(self, key: str) -> int | None:
        if isinstance(self.map.get(key), int | float) and not isinstance(self.map.get(key), bool):
            self.fail(key, "must be a duration with a unit, e.g. 30s, 5m, 1h30m")
            return None
        text = self.text(key)
        if text is None:
            return None
        try:
            return parse_duration_ms(text)
        except ValueError as exc:
            self.fail(key, str(exc))
            return None

    def mapping(self, key: str) -> YMap | None:
        return self._typed(key, YMap, "a mapping")  # type: ignore[no-any-return]

    def items(self, key: str) -> YList | None:
        return self._typed(key, YList, "a list")  # type: ignore[no-any-return]

