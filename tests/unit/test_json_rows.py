"""The JSON argument of the set-based writes (storage/events.py ``json_rows``): orjson's
text, and ``json``'s for what orjson refuses, so both accept the same rows."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from qinglong.storage.events import json_rows

_SCALARS = st.none() | st.booleans() | st.integers() | st.text()
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(st.text(), inner, max_size=4), max_leaves=12)


@given(st.lists(st.dictionaries(st.text(), _VALUES, max_size=6), max_size=6))
def test_any_rows_read_back_as_themselves(rows: list[dict[str, object]]) -> None:
    assert json.loads(json_rows(rows)) == rows


def test_an_event_row_is_compact_text() -> None:
    row = {"run_id": "r1", "sequence": 3, "payload": {"to": "running", "pid": 12, "log": None}}
    assert json_rows([row]) == ('[{"run_id":"r1","sequence":3,'
                                '"payload":{"to":"running","pid":12,"log":null}}]')


def test_what_orjson_refuses_goes_through_json() -> None:
    big = [{"value": 2**70}]  # beyond orjson's 64 bits
    assert json_rows(big) == '[{"value":1180591620717411303424}]'
    lone = [{"text": "a\ud800b"}]  # not encodable as UTF-8
    assert json_rows(lone) == '[{"text":"a\\ud800b"}]'
