"""The SQL files' fragments (storage/sqlfile.py): written once, spliced into the blocks that
include them, never queries of their own; and every fragment there is, is used."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from qinglong.storage.sqlfile import COMMON, common_fragments, load_queries, parse_blocks

DIALECTS = ("qinglong.storage.postgres", "qinglong.storage.sqlite")

TEXT = """
-- name: first
SELECT a,
-- include: columns
FROM t;

-- fragment: columns
-- a comment inside a fragment is dropped
       b, c

-- name: second
-- include: columns
"""


def test_an_include_splices_the_fragment_and_a_fragment_is_no_query() -> None:
    blocks = parse_blocks(TEXT, "x.sql", common={})
    assert blocks == {"first": "SELECT a,\n       b, c\nFROM t", "second": "b, c"}


def test_a_common_fragment_is_seen_and_a_local_one_may_not_shadow_it() -> None:
    text = "-- name: q\nSELECT\n-- include: shared\n"
    assert parse_blocks(text, "x.sql", common={"shared": "1"}) == {"q": "SELECT\n1"}
    with pytest.raises(ValueError, match="also a common one"):
        parse_blocks(text + "-- fragment: shared\n2\n", "x.sql", common={"shared": "1"})


@pytest.mark.parametrize(("text", "error"), [
    ("-- name: q\nSELECT\n-- include: nowhere\n", "no SQL fragment 'nowhere'"),
    ("-- fragment: f\n1\n-- fragment: f\n2\n", "duplicate SQL block 'f'"),
    ("-- name: f\nSELECT 1\n-- fragment: f\n2\n", "duplicate SQL block 'f'"),
    ("-- fragment: f\n-- include: g\n-- fragment: g\n1\n", "fragment 'f' includes another"),
    ("-- fragment: f\n-- only a comment\n", "fragment 'f' is empty"),
])
def test_a_broken_file_is_refused(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_blocks(text, "x.sql", common={})


def _texts(package: str) -> list[str]:
    folder = resources.files(package).joinpath("queries")
    return [entry.read_text(encoding="utf-8") for entry in folder.iterdir()
            if entry.name.endswith(".sql")]


def _included(texts: list[str]) -> set[str]:
    return {name for text in texts
            for name in re.findall(r"^--\s*include:\s*(\w+)\s*$", text, re.MULTILINE)}


def test_every_common_fragment_is_included_by_both_dialects() -> None:
    assert common_fragments(), f"{COMMON} holds no fragment"
    for package in DIALECTS:
        unused = set(common_fragments()) - _included(_texts(package))
        assert unused == set(), f"{package} never includes {sorted(unused)}"


def test_every_fragment_of_a_dialect_file_is_included_in_that_file() -> None:
    for package in DIALECTS:
        load_queries(package)  # every include resolves
        for text in _texts(package):
            defined = set(re.findall(r"^--\s*fragment:\s*(\w+)\s*$", text, re.MULTILINE))
            assert defined <= _included([text]), f"{package}: unused {defined}"


def test_no_loaded_query_keeps_an_include_line() -> None:
    for package in DIALECTS:
        for name, body in load_queries(package).items():
            assert "include:" not in body, name
