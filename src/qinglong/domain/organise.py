"""The rules of what a user organises tasks and triggers with (issue 23, item 1): labels on
tasks and triggers (short tags such as ``team:payments`` or ``nightly``, set by an operator
of the project, outside the revisions: they are not part of what runs), a user's pins and a
user's saved filters. Pure: checks and their messages, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from qinglong.errors import InvalidInput

LABEL_MAX = 48
LABEL = re.compile(rf"^[a-z0-9][a-z0-9._:/-]{{0,{LABEL_MAX - 1}}}$")
LABEL_RULE = (f"must be 1-{LABEL_MAX} characters of lowercase letters, digits, '.', '_', ':', "
              "'/' and '-', starting with a letter or digit (e.g. team:payments, nightly)")
MAX_LABELS = 16  # on one task or trigger
LABEL_KINDS = ("task", "trigger")
PIN_KINDS = LABEL_KINDS
MAX_PINS = 200  # per user
MAX_FILTERS = 50  # per user

FILTER_NAME_MAX = 64
FILTER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9 ._:-]{0,62}[A-Za-z0-9._:-])?$")
FILTER_NAME_RULE = (f"must be 1-{FILTER_NAME_MAX} characters of letters, digits, spaces, "
                    "'.', '_', ':' and '-', starting with a letter or digit and not ending "
                    "with a space")
FILTER_PAGES = ("runs", "dashboard", "tasks")  # the panel pages a filter is saved for
FILTER_KEY = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
FILTER_KEY_RULE = "must be 1-32 characters of lowercase letters, digits and '_' (a query name)"
FILTER_VALUE_MAX = 256
MAX_FILTER_KEYS = 16
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_label(value: object, field: str = "label") -> str:
    if not isinstance(value, str) or not LABEL.fullmatch(value):
        raise InvalidInput(field, LABEL_RULE)
    return value


def check_labels(values: Iterable[object], field: str = "labels") -> tuple[str, ...]:
    """The labels, each checked, without repeats, sorted; at most ``MAX_LABELS``."""
    found: set[str] = set()
    for index, value in enumerate(values):
        found.add(check_label(value, f"{field}[{index}]"))
    if len(found) > MAX_LABELS:
        raise InvalidInput(field, f"at most {MAX_LABELS} labels on one task or trigger")
    return tuple(sorted(found))


def check_kind(value: str, field: str = "kind") -> str:
    if value not in LABEL_KINDS:
        raise InvalidInput(field, "must be task or trigger")
    return value


def check_filter_name(value: object, field: str = "filter") -> str:
    if not isinstance(value, str) or not FILTER_NAME.fullmatch(value):
        raise InvalidInput(field, FILTER_NAME_RULE)
    return value


def check_filter_page(value: object, field: str = "page") -> str:
    if value not in FILTER_PAGES:
        raise InvalidInput(field, "must be one of " + ", ".join(FILTER_PAGES))
    assert isinstance(value, str)
    return value


def check_filter_query(query: Mapping[str, object], field: str = "query") -> dict[str, str]:
    """A saved filter's query: at most ``MAX_FILTER_KEYS`` names (as the page's query
    parameters are named), each with a text value without control characters."""
    if len(query) > MAX_FILTER_KEYS:
        raise InvalidInput(field, f"at most {MAX_FILTER_KEYS} entries")
    checked: dict[str, str] = {}
    for key, value in query.items():
        if not isinstance(key, str) or not FILTER_KEY.fullmatch(key):
            raise InvalidInput(f"{field}.{key}", FILTER_KEY_RULE)
        if not isinstance(value, str) or len(value) > FILTER_VALUE_MAX \
                or _CONTROL.search(value):
            raise InvalidInput(f"{field}.{key}", f"must be text of at most {FILTER_VALUE_MAX} "
                                                 "characters without control characters")
        checked[key] = value
    return dict(sorted(checked.items()))
