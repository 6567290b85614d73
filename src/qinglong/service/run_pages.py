"""Pages of Runs with an opaque cursor (the HTTP API's run list).

A page lists Runs in the order of `ql run list` (by occurrence, newest first unless oldest
first) and carries ``next_cursor`` when more follow. The cursor names the last Run shown (its
time and id) and the order it was read in, so the next page starts exactly after it however
many Runs arrive meanwhile; filters are not in the cursor: send the same ones again.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import replace

from qinglong.errors import InvalidInput
from qinglong.service.views.runs import RunPageView, run_view
from qinglong.storage.runs import RunStore
from qinglong.storage.runs.params import RunListParams, RunPageParams

MAX_PAGE = 1000
_CURSOR_VERSION = 1


def encode_cursor(at_ms: int, run_id: str, oldest_first: bool) -> str:
    raw = json.dumps([_CURSOR_VERSION, at_ms, run_id, "asc" if oldest_first else "desc"],
                     separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, oldest_first: bool) -> tuple[int, str]:
    bad = InvalidInput("cursor", "is not a cursor this API gave out (send next_cursor as it came)")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        version, at_ms, run_id, order = json.loads(raw)
    except (ValueError, TypeError, binascii.Error):
        raise bad from None
    if (version != _CURSOR_VERSION or isinstance(at_ms, bool) or not isinstance(at_ms, int)
            or not isinstance(run_id, str) or order not in ("asc", "desc")):
        raise bad
    if (order == "asc") != oldest_first:
        raise InvalidInput("cursor", "was given out for the other order: send the same "
                                     "order as for the first page")
    return at_ms, run_id


class RunPages:
    def __init__(self, store: RunStore) -> None:
        self._store = store

    def page(self, filters: RunListParams, cursor: str | None = None) -> RunPageView:
        if not 1 <= filters.limit <= MAX_PAGE:
            raise InvalidInput("limit", f"must be between 1 and {MAX_PAGE}")
        after = None if cursor is None else decode_cursor(cursor, filters.oldest_first)
        wider = replace(filters, limit=filters.limit + 1)
        runs = self._store.run_page(RunPageParams(filters=wider, after=after))
        shown = runs[:filters.limit]
        next_cursor = None
        if len(runs) > filters.limit:
            last = shown[-1]
            at = last.scheduled_for_ms if last.scheduled_for_ms is not None else last.created_at_ms
            next_cursor = encode_cursor(at, last.id, filters.oldest_first)
        return RunPageView(items=[run_view(run) for run in shown], next_cursor=next_cursor)
