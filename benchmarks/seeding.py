"""Bulk triggers for the admission benchmark, in the exact shape the product writes.

Publishing 100,000 or 1,000,000 triggers one by one through `ql trigger publish` (or the
in-process Catalog call behind it) takes minutes to hours, and letting the replicas
initialise a million NULL cursors one SERIALIZABLE commit at a time takes longer still.
So a dataset is built like this:

1. through the product: `ql db migrate`, `ql project create`, `ql task publish` and, in
   process, `Catalog.trigger_publish` for a few *seed* triggers;
2. as the superuser, in one transaction, set-based SQL replicates the seed's rows to the
   other trigger ids: a trigger head, revision 1 and a schedule row with a NULL cursor and
   versions 0 -- what `trigger_publish` writes (queries/triggers.sql: trigger_head_insert,
   trigger_revision_insert, schedule_insert). Each revision's content digest is SHA-256 over
   `qinglong.trigger-definition.v1` NUL canonical JSON, built in SQL;
3. `arm` republishes a set of triggers with a new cron expression (a new revision, the head
   advanced, the schedule row reset: trigger_revision_insert, trigger_head_advance,
   schedule_reset) and then initialises the cursor the way a replica's INITIALIZE decision
   does (claim: claim_version + 1, state_version + 1, a row in trigger_schedule_claims;
   commit: cursor = first occurrence at or after the revision's publish time, claim cleared,
   state_version + 1) -- all set-based, as the superuser, in one transaction.

Every constraint stays in force (nothing is disabled), and `verify` re-reads a sample of the
rows with the product's own code: each revision through `trigger_revision_from_row` (digest
checked) and each cursor against `CronSchedule.first_at_or_after(published_at)`.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

PROJECT = "bench"
TASK = "noop"
SEED_TRIGGERS = 3
SEED_OWNER = "bench-seed"
SEED_LEASE_MS = 30_000
DIGEST_PREFIX = "qinglong.trigger-definition.v1"
NOW_SQL = "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint"


def trigger_id(n: int) -> str:
    return f"t{n:07d}"


def ql(*args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QL_")}
    subprocess.run([sys.executable, "-m", "qinglong", *args], check=True, env=env,
                   stdout=subprocess.DEVNULL)


# The canonical JSON of a trigger revision (keys sorted, no whitespace), built in SQL from
# a revision row ``r`` and its spec text ``spec``; ids and expressions are plain ASCII, and
# to_json() quotes them as json.dumps does.
_CONTENT = (
    "'{\"enabled\":' || CASE WHEN {r}.enabled THEN 'true' ELSE 'false' END"
    " || ',\"projectId\":' || to_json({r}.project_id::text)::text"
    " || ',\"revision\":' || {r}.revision::text"
    " || ',\"spec\":' || {spec}"
    " || ',\"taskContentDigest\":' || to_json({r}.task_content_digest::text)::text"
    " || ',\"taskId\":' || to_json({r}.task_id::text)::text"
    " || ',\"taskRevision\":' || {r}.task_revision::text"
    " || ',\"triggerId\":' || to_json({r}.trigger_id::text)::text || '}'"
)


def _digest_sql(row: str, spec: str) -> str:
    content = _CONTENT.replace("{r}", row).replace("{spec}", spec)
    return (f"encode(sha256(convert_to('{DIGEST_PREFIX}', 'UTF8') || '\\x00'::bytea || "
            f"convert_to({content}, 'UTF8')), 'hex')")


def _spec_sql(expression_sql: str, misfire: str) -> str:
    """The canonical text of a `qinglong/cron@v1` envelope (UTC, overlap allowed)."""
    return ("('{\"config\":{\"expression\":' || to_json((" + expression_sql + ")::text)::text"
            f" || ',\"misfirePolicy\":\"{misfire}\",\"timezone\":\"UTC\"}},"
            "\"schema\":\"qinglong/cron@v1\"}')")


@dataclass
class Dataset:
    """One migrated database holding ``size`` triggers of project `bench`."""

    superuser: str  # postgresql://postgres@.../<db>
    admin: str  # postgresql://ql_admin@.../<db>
    size: int
    misfire: str = "skip"

    def connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        return psycopg.connect(self.superuser, autocommit=True)

    # -- creation ---------------------------------------------------------------------

    def create(self, progress: Callable[[str], None]) -> None:
        ql("db", "migrate", "--database-url", self.superuser)
        ql("project", "create", PROJECT, "--database-url", self.admin)
        ql("task", "publish", "--database-url", self.admin, "--project", PROJECT, "--task", TASK,
           "--argv", "/bin/true")
        seeds = min(SEED_TRIGGERS, self.size)
        self._publish_seeds(seeds)
        with self.connect() as conn:
            self.misfire = str(_one(conn, """
                SELECT spec_json -> 'config' ->> 'misfirePolicy' FROM qinglong.trigger_revisions
                 WHERE project_id = %s AND trigger_id = %s AND revision = 1""",
                (PROJECT, trigger_id(0))))
            self._check_digest_sql(conn)
            if self.size > seeds:
                progress(f"    replicating {self.size - seeds:,} triggers with set-based SQL")
                self._replicate(conn, seeds)
            self._initialize(conn)
            conn.execute("VACUUM ANALYZE qinglong.triggers")
            conn.execute("VACUUM ANALYZE qinglong.trigger_revisions")
            conn.execute("VACUUM ANALYZE qinglong.trigger_schedules")

    def _publish_seeds(self, seeds: int) -> None:
        """The seed triggers through the product's own publish path (Catalog, as ql_admin),
        with a yearly expression and the product's default misfire policy."""
        from qinglong.clock import SystemClock
        from qinglong.profiles.open import open_services
        from qinglong.storage.definitions.params import TriggerPublishParams

        clock = SystemClock()
        opened = open_services(self.admin, clock)
        try:
            catalog = opened.catalog
            for n in range(seeds):
                catalog.trigger_publish(TriggerPublishParams(
                    project_id=PROJECT, trigger_id=trigger_id(n), task_id=TASK,
                    expression="0 0 0 1 1 *", timezone="UTC"))
        finally:
            opened.close()

    def _check_digest_sql(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        """The SQL digest must reproduce what the product wrote for its seeds."""
        # jsonb::text is not canonical JSON (spaces), so rebuild the spec from its parts:
        spec = _spec_sql("r.spec_json -> 'config' ->> 'expression'", self.misfire)
        rows = conn.execute(
            f"SELECT r.trigger_id, r.content_digest = {_digest_sql('r', spec)}, "
            f"r.spec_json = {spec}::jsonb FROM qinglong.trigger_revisions r "
            "WHERE r.project_id = %s", (PROJECT,)).fetchall()
        bad = [str(t) for t, same_digest, same_spec in rows if not (same_digest and same_spec)]
        if not rows or bad:
            raise SystemExit(f"the SQL digest does not reproduce the product's for {bad}")

    def _replicate(self, conn: psycopg.Connection[tuple[Any, ...]], first: int) -> None:
        params = {"p": PROJECT, "tpl": trigger_id(0), "lo": first, "hi": self.size}
        with conn.transaction():
            conn.execute(f"""
                CREATE TEMP TABLE bench_new ON COMMIT DROP AS
                SELECT 't' || lpad(g::text, 7, '0') AS trigger_id, {NOW_SQL} AS at_ms
                  FROM generate_series(%(lo)s::int, %(hi)s::int - 1) g""", params)
            conn.execute("""
                INSERT INTO qinglong.triggers
                    (project_id, trigger_id, task_id, current_revision, created_at_ms,
                     updated_at_ms)
                SELECT h.project_id, n.trigger_id, h.task_id, 1, n.at_ms, n.at_ms
                  FROM bench_new n
                  JOIN qinglong.triggers h ON h.project_id = %(p)s AND h.trigger_id = %(tpl)s
            """, params)
            spec = _spec_sql("r.spec_json -> 'config' ->> 'expression'", self.misfire)
            conn.execute(f"""
                INSERT INTO qinglong.trigger_revisions
                    (project_id, trigger_id, revision, task_id, task_revision,
                     task_content_digest, spec_json, enabled, content_digest, created_at_ms)
                SELECT r.project_id, r.trigger_id, r.revision, r.task_id, r.task_revision,
                       r.task_content_digest, r.spec_json, r.enabled,
                       {_digest_sql('r', spec)},
                       r.created_at_ms
                  FROM (SELECT t.project_id, n.trigger_id, 1 AS revision, t.task_id,
                               t.task_revision, t.task_content_digest, t.spec_json, t.enabled,
                               n.at_ms AS created_at_ms
                          FROM bench_new n
                          JOIN qinglong.trigger_revisions t
                            ON t.project_id = %(p)s AND t.trigger_id = %(tpl)s
                           AND t.revision = 1) r
            """, params)
            conn.execute("""
                INSERT INTO qinglong.trigger_schedules
                    (project_id, trigger_id, trigger_revision, next_fire_at_ms,
                     last_scheduled_at_ms, state_version, claim_owner, claim_token,
                     claim_version, claim_expires_at_ms, updated_at_ms)
                SELECT %(p)s, n.trigger_id, 1, NULL, NULL, 0, NULL, NULL, 0, NULL, n.at_ms
                  FROM bench_new n
            """, params)

    def _initialize(self, conn: psycopg.Connection[tuple[Any, ...]]) -> None:
        """Every NULL cursor initialised as a replica's INITIALIZE decision would do it: the
        yearly expression's first occurrence at or after the publish time."""
        from qinglong.domain.cron import CronSchedule

        published = int(_one(conn, "SELECT max(created_at_ms) FROM qinglong.trigger_revisions "
                                   "WHERE project_id = %s", (PROJECT,)))
        first = CronSchedule.parse("0 0 0 1 1 *", "UTC").first_at_or_after(published)
        with conn.transaction():
            conn.execute("""
                WITH moved AS (
                    UPDATE qinglong.trigger_schedules s
                       SET next_fire_at_ms = %(first)s, state_version = s.state_version + 2,
                           claim_version = s.claim_version + 1,
                           updated_at_ms = greatest(s.updated_at_ms, %(now)s)
                     WHERE s.project_id = %(project)s AND s.next_fire_at_ms IS NULL
                    RETURNING s.project_id, s.trigger_id, s.trigger_revision, s.claim_version,
                              s.updated_at_ms
                )
                INSERT INTO qinglong.trigger_schedule_claims
                    (project_id, trigger_id, trigger_revision, claim_version, claim_owner,
                     claim_token, cursor_ms, acquired_at_ms, expires_at_ms)
                SELECT project_id, trigger_id, trigger_revision, claim_version, %(owner)s,
                       gen_random_uuid(), NULL, updated_at_ms, updated_at_ms + %(lease)s
                  FROM moved
            """, {"first": first, "now": int(_one(conn, f"SELECT {NOW_SQL}")),
                  "project": PROJECT, "owner": SEED_OWNER, "lease": SEED_LEASE_MS})

    # -- republish and initialise ---------------------------------------------------------

    def arm(self, *, expression_sql: str, cursor_sql: str, where_sql: str = "true",
            params: dict[str, Any] | None = None) -> tuple[int, int]:
        """Republish the triggers matching ``where_sql`` with the cron expression
        ``expression_sql`` and initialise their cursors to ``cursor_sql``. The three are SQL
        over ``a.n`` (the trigger's number) and ``%(p)s`` (the publish time, ms, database
        clock); ``cursor_sql`` must give the expression's first occurrence at or after
        ``%(p)s`` (``verify`` checks a sample). Returns (publish time, rows armed)."""
        args = {"project": PROJECT, "owner": SEED_OWNER, "lease": SEED_LEASE_MS,
                **(params or {})}
        spec = _spec_sql(expression_sql, self.misfire)
        with self.connect() as conn, conn.transaction():
            p = int(_one(conn, f"SELECT {NOW_SQL}"))
            args["p"] = p
            conn.execute(f"""
                CREATE TEMP TABLE bench_arm ON COMMIT DROP AS
                SELECT a.* FROM (
                    SELECT h.project_id, h.trigger_id, h.current_revision + 1 AS revision,
                           substring(h.trigger_id FROM 2)::int AS n
                      FROM qinglong.triggers h
                     WHERE h.project_id = %(project)s AND h.deleted_at_ms IS NULL) a
                 WHERE {where_sql}
            """, args)
            armed = int(_one(conn, "SELECT count(*) FROM bench_arm"))
            # a new revision per trigger (trigger_revision_insert) ...
            conn.execute(f"""
                INSERT INTO qinglong.trigger_revisions
                    (project_id, trigger_id, revision, task_id, task_revision,
                     task_content_digest, spec_json, enabled, content_digest, created_at_ms)
                SELECT r.project_id, r.trigger_id, r.revision, r.task_id, r.task_revision,
                       r.task_content_digest, r.spec::jsonb, true,
                       {_digest_sql('r', 'r.spec')}, %(p)s
                  FROM (SELECT a.project_id, a.trigger_id, a.revision, o.task_id,
                               o.task_revision, o.task_content_digest, true AS enabled,
                               {spec} AS spec
                          FROM bench_arm a
                          JOIN qinglong.trigger_revisions o
                            ON o.project_id = a.project_id AND o.trigger_id = a.trigger_id
                           AND o.revision = a.revision - 1) r
            """, args)
            # ... the head advanced (trigger_head_advance) ...
            conn.execute("""
                UPDATE qinglong.triggers h
                   SET current_revision = a.revision,
                       updated_at_ms = greatest(h.updated_at_ms, %(p)s), deleted_at_ms = NULL
                  FROM bench_arm a
                 WHERE h.project_id = a.project_id AND h.trigger_id = a.trigger_id
                   AND h.current_revision = a.revision - 1
            """, args)
            # ... the schedule row reset (schedule_reset), claimed once by the seeding
            # "replica" (schedule_claim) and initialised (schedule_advance_fenced):
            # state_version + 3, claim_version + 2, cursor set, claim cleared.
            conn.execute(f"""
                WITH moved AS (
                    UPDATE qinglong.trigger_schedules s
                       SET trigger_revision = a.revision,
                           next_fire_at_ms = ({cursor_sql}),
                           last_scheduled_at_ms = NULL,
                           state_version = s.state_version + 3,
                           claim_owner = NULL, claim_token = NULL, claim_expires_at_ms = NULL,
                           claim_version = s.claim_version + 2,
                           updated_at_ms = greatest(s.updated_at_ms, %(p)s)
                      FROM bench_arm a
                     WHERE s.project_id = a.project_id AND s.trigger_id = a.trigger_id
                    RETURNING s.project_id, s.trigger_id, s.trigger_revision, s.claim_version,
                              s.updated_at_ms
                )
                INSERT INTO qinglong.trigger_schedule_claims
                    (project_id, trigger_id, trigger_revision, claim_version, claim_owner,
                     claim_token, cursor_ms, acquired_at_ms, expires_at_ms)
                SELECT project_id, trigger_id, trigger_revision, claim_version, %(owner)s,
                       gen_random_uuid(), NULL, updated_at_ms, updated_at_ms + %(lease)s
                  FROM moved
            """, args)
        return p, armed

    # -- verification with the product's own code ---------------------------------------

    def verify(self, sample: int = 200) -> int:
        """Re-read a random sample of current revisions and schedule rows with the product's
        code; raise RuntimeError on any mismatch (a row a running replica has claimed or
        admitted since is checked for its digest only). Returns how many rows were checked."""
        from qinglong.domain.trigger import trigger_revision_from_row

        picks = sorted(random.sample(range(self.size), min(sample, self.size)))
        ids = [trigger_id(n) for n in picks]
        with psycopg.connect(self.superuser, autocommit=True,
                             row_factory=psycopg.rows.dict_row) as conn:
            rows = conn.execute("""
                SELECT r.*, s.next_fire_at_ms AS s_cursor, s.trigger_revision AS s_revision,
                       s.last_scheduled_at_ms AS s_last,
                       s.claim_token AS s_token, s.state_version AS s_state,
                       s.claim_version AS s_claim_version
                  FROM qinglong.triggers h
                  JOIN qinglong.trigger_revisions r
                    ON r.project_id = h.project_id AND r.trigger_id = h.trigger_id
                   AND r.revision = h.current_revision
                  JOIN qinglong.trigger_schedules s
                    ON s.project_id = h.project_id AND s.trigger_id = h.trigger_id
                 WHERE h.project_id = %s AND h.trigger_id = ANY(%s)
            """, (PROJECT, ids)).fetchall()
        if len(rows) != len(ids):
            raise RuntimeError(f"verify: {len(ids) - len(rows)} sampled triggers are missing")
        for row in rows:
            revision = trigger_revision_from_row(row, row["spec_json"])  # digest checked
            if row["s_revision"] != revision.revision:
                raise RuntimeError(f"verify: schedule row of {row['trigger_id']} is off: {row}")
            if row["s_token"] is not None or row["s_last"] is not None:
                continue  # claimed or admitted by a running replica since: its cursor moved
            if row["s_cursor"] is not None:
                first = revision.spec.schedule.first_at_or_after(revision.created_at_ms)
                if int(row["s_cursor"]) != first:
                    raise RuntimeError(f"verify: cursor of {row['trigger_id']} is "
                                       f"{row['s_cursor']}, the product would write {first}")
        return len(rows)


def _one(conn: psycopg.Connection[Any], sql: str, params: Any = None) -> Any:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row[0]
