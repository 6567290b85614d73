"""The HTTP API's reads on PostgreSQL: pages of Runs after a cursor, per-task counts by bucket."""

from __future__ import annotations

from collections.abc import Callable
from typing import LiteralString, TypeVar

import psycopg

from qinglong.domain.model import Run
from qinglong.storage.ports import RunBucket, RunBucketParams, RunPageParams
from qinglong.storage.postgres.connection import QUERIES, Connector, PgConnection
from qinglong.storage.postgres.errors import translate
from qinglong.storage.web_reads import WebReader

T = TypeVar("T")

_FILTERS: LiteralString = """
WHERE (%(project_id)s::varchar IS NULL OR r.project_id = %(project_id)s::varchar)
  AND (%(task_id)s::varchar IS NULL OR r.task_id = %(task_id)s::varchar)
  AND (%(trigger_id)s::varchar IS NULL OR r.trigger_id = %(trigger_id)s::varchar)
  AND (%(status)s::varchar IS NULL OR r.status = %(status)s::varchar)
  AND (%(since_ms)s::bigint IS NULL
       OR coalesce(r.scheduled_for_ms, r.created_at_ms) >= %(since_ms)s::bigint)
  AND (%(until_ms)s::bigint IS NULL
       OR coalesce(r.scheduled_for_ms, r.created_at_ms) < %(until_ms)s::bigint)
"""
_SELECT: LiteralString = """
SELECT r.*,
       (SELECT a.exit_code FROM qinglong.run_attempts a WHERE a.run_id = r.id
         ORDER BY a.attempt DESC LIMIT 1) AS exit_code
FROM qinglong.runs r
"""

WEB_QUERIES: dict[str, LiteralString] = {
    # A page of Runs newest first, after the Run (after_ms, after_id) when given.
    "run_page_newest_first": _SELECT + _FILTERS + """
  AND (%(after_ms)s::bigint IS NULL
       OR (coalesce(r.scheduled_for_ms, r.created_at_ms), r.id)
          < (%(after_ms)s::bigint, %(after_id)s::varchar))
ORDER BY coalesce(r.scheduled_for_ms, r.created_at_ms) DESC, r.id DESC
LIMIT %(limit)s""",
    # The same, oldest first.
    "run_page_oldest_first": _SELECT + _FILTERS + """
  AND (%(after_ms)s::bigint IS NULL
       OR (coalesce(r.scheduled_for_ms, r.created_at_ms), r.id)
          > (%(after_ms)s::bigint, %(after_id)s::varchar))
ORDER BY coalesce(r.scheduled_for_ms, r.created_at_ms) ASC, r.id ASC
LIMIT %(limit)s""",
    # Per task and bucket of admission time: counts by outcome and durations. A lost Run is
    # a failure; a Run an overlap policy ended (cancelled, reason policy) is skipped: neither
    # a success nor a failure nor a cancellation.
    "run_buckets": """
SELECT task_id, (created_at_ms / %(bucket_ms)s::bigint) * %(bucket_ms)s::bigint
           AS bucket_start_ms,
       count(*) AS runs,
       count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE status IN ('failed', 'timed_out', 'lost')) AS failed,
       count(*) FILTER (WHERE status = 'cancelled'
                          AND cancel_reason IS DISTINCT FROM 'policy') AS cancelled,
       count(*) FILTER (WHERE status = 'cancelled' AND cancel_reason = 'policy') AS skipped,
       coalesce(sum(finished_at_ms - started_at_ms), 0) AS total_duration_ms,
       max(finished_at_ms - started_at_ms) AS max_duration_ms
FROM qinglong.runs
WHERE project_id = %(project_id)s
  AND (%(task_id)s::varchar IS NULL OR task_id = %(task_id)s::varchar)
  AND created_at_ms >= %(from_ms)s AND created_at_ms < %(to_ms)s
GROUP BY task_id, bucket_start_ms
ORDER BY task_id, bucket_start_ms
LIMIT %(limit)s""",
}


class PgWebReadStore:
    """The RunPageStore port on PostgreSQL."""

    def __init__(self, connector: Connector) -> None:
        self._connector = connector

    def _read(self, action: str, work: Callable[[WebReader], T]) -> T:
        with self._connector.connection() as conn:
            try:
                return work(_reader(conn))
            except psycopg.Error as exc:
                raise translate(exc, action, conn) from exc

    def run_page(self, params: RunPageParams) -> list[Run]:
        return self._read("list runs", lambda reader: reader.run_page(params))

    def run_buckets(self, params: RunBucketParams) -> list[RunBucket]:
        return self._read("count runs", lambda reader: reader.run_buckets(params))


def _reader(conn: PgConnection) -> WebReader:
    return WebReader(conn, WEB_QUERIES, QUERIES)
