"""Retention benchmark (docs/retention.md): how fast `ql control`'s pruner empties a history.

    python -m benchmarks.retention [--claims N] [--runs N] [--events-per-run N] [--json FILE]

Starts its own embedded PostgreSQL (durable: fsync and synchronous_commit on), migrates it as
`ql db migrate` does (plus the retention migration's grants and indexes when the stream does
not have them yet), seeds, as the superuser, N old claim records on one schedule row and N
old ended Runs with their events (plus 10% recent ones that must stay), then runs the
product's PgRetention as ql_runtime, pass after pass at its defaults (30 statements of
2,000 per table per pass), until a pass deletes nothing. Prints the table sizes before and after,
the rows deleted per second and the longest statement, and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from qinglong.domain.retention import DAY_MS, PRUNE_BATCH, PRUNE_STATEMENTS
from qinglong.storage.postgres.connection import SingleConnector
from qinglong.storage.postgres.driver import open_postgres
from qinglong.storage.postgres.migrate import migrate
from qinglong.storage.postgres.retention import PgRetention, table_sizes
from qinglong.storage.postgres.roles import provision_roles
from testkit.postgres import EmbeddedPostgres

NOW = "(floor(extract(epoch FROM clock_timestamp()) * 1000))::bigint"
RETENTION_DDL = (
    ("CREATE INDEX IF NOT EXISTS trigger_schedule_claims_acquired_idx "
     "ON qinglong.trigger_schedule_claims (acquired_at_ms)"),
    ("CREATE INDEX IF NOT EXISTS runs_finished_idx ON qinglong.runs (finished_at_ms, id) "
     "WHERE finished_at_ms IS NOT NULL"),
    "GRANT DELETE ON qinglong.trigger_schedule_claims, qinglong.run_events TO ql_runtime",
)


def seed(conn: Any, claims: int, runs: int, per_run: int) -> None:
    old = f"{NOW} - {40 * DAY_MS}"
    recent = f"{NOW} - {DAY_MS}"
    conn.execute("SET search_path = qinglong, public")
    conn.execute("INSERT INTO projects VALUES ('bench', 'bench', 'bench', 'active', 1, 0, 0)")
    # one trigger head is enough for claims: they carry no foreign key
    conn.execute(
        "INSERT INTO trigger_schedule_claims (project_id, trigger_id, trigger_revision, "
        "claim_version, claim_owner, claim_token, cursor_ms, acquired_at_ms, expires_at_ms) "
        f"SELECT 'bench', 't' || (v % 1000), 1, v, 'r1', gen_random_uuid(), v, "
        f"CASE WHEN v % 10 = 0 THEN {recent} ELSE {old} END + v % 1000, "
        f"CASE WHEN v % 10 = 0 THEN {recent} ELSE {old} END + v % 1000 + 30000 "
        f"FROM generate_series(1, {claims}) v")
    conn.execute("CREATE TEMP TABLE bench_heads AS SELECT DISTINCT trigger_id, max(claim_version) "
                 "AS v FROM trigger_schedule_claims GROUP BY trigger_id")
    # schedule rows need a trigger revision: the claims' rows are judged by their version only,
    # so the "latest claim" rule is emulated by keeping the claims check honest through a view
    # of the latest version per row below
    conn.execute(
        "INSERT INTO runs (id, project_id, task_id, task_revision, trigger_type, "
        "execution_origin, execution_owner, status, version, event_sequence, created_at_ms, "
        "finished_at_ms) SELECT 'b-' || n, 'bench', 'noop', 'x', 'manual', 'manual', "
        f"'runtime', 'succeeded', 1, {per_run}, {old}, "
        f"CASE WHEN n % 10 = 0 THEN {recent} ELSE {old} END + n % 100000 "
        f"FROM generate_series(1, {runs}) n")
    conn.execute(
        "INSERT INTO run_events (id, run_id, sequence, type, actor_type, payload, created_at_ms) "
        "SELECT gen_random_uuid()::text, 'b-' || n, s, 'run.bench', 'system', "
        f"'{{\"k\": 1}}', 0 FROM generate_series(1, {runs}) n, generate_series(1, {per_run}) s")
    conn.execute("ANALYZE")


def schedule_rows(conn: Any) -> None:
    """The claims' schedule rows (definitions through the product's tables, minimal), with
    claim_version at the latest claim, so the pruner keeps exactly one claim per row."""
    conn.execute(
        "INSERT INTO task_definitions VALUES ('bench', 'noop', 1, 0, 0)")
    conn.execute(
        "INSERT INTO task_definition_revisions (project_id, task_id, revision, name, kind, "
        "spec_json, enabled, content_digest, created_at_ms) VALUES ('bench', 'noop', 1, 'noop', "
        "'command', '{}', true, repeat('0', 64), 0)")
    conn.execute(
        "INSERT INTO triggers (project_id, trigger_id, task_id, current_revision, created_at_ms, "
        "updated_at_ms) SELECT 'bench', trigger_id, 'noop', 1, 0, 0 FROM bench_heads")
    conn.execute(
        "INSERT INTO trigger_revisions (project_id, trigger_id, revision, task_id, task_revision, "
        "task_content_digest, spec_json, enabled, content_digest, created_at_ms) "
        "SELECT 'bench', trigger_id, 1, 'noop', 1, repeat('0', 64), '{}', true, repeat('0', 64), 0 "
        "FROM bench_heads")
    conn.execute(
        "INSERT INTO trigger_schedules (project_id, trigger_id, trigger_revision, state_version, "
        "claim_version, updated_at_ms) SELECT 'bench', trigger_id, 1, 0, v, 0 FROM bench_heads")


def relation_mb(conn: Any, name: str) -> float:
    row = conn.execute(f"SELECT pg_total_relation_size('qinglong.{name}') AS b").fetchone()
    return round(int(row["b"]) / 1048576, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.retention")
    parser.add_argument("--claims", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--events-per-run", type=int, default=5)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/retention.json"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ql-retention-bench-") as base:
        pg = EmbeddedPostgres(base_dir=Path(base)).start()
        try:
            with pg.connect() as conn:
                conn.autocommit = True
                conn.execute("CREATE DATABASE bench")
            with psycopg.connect(pg.dsn("postgres", "bench"), autocommit=True,
                                 row_factory=dict_row) as conn:
                provision_roles(conn)
                migrate(conn)
                for statement in RETENTION_DDL:
                    conn.execute(statement)
                started = time.monotonic()
                seed(conn, args.claims, args.runs, args.events_per_run)
                schedule_rows(conn)
                seed_s = time.monotonic() - started
                fsync = conn.execute("SHOW fsync").fetchone()
                mb_before = {t: relation_mb(conn, t) for t in ("trigger_schedule_claims", "run_events")}
            connector = SingleConnector(pg.dsn("ql_runtime", "bench"), application_name="bench")
            db = open_postgres(connector)
            try:
                before = table_sizes(db)
                pruner = PgRetention(db, days=30)
                passes, longest, claims, events = 0, 0.0, 0, 0
                started = time.monotonic()
                while True:
                    t0 = time.monotonic()
                    report = pruner.prune()
                    took = time.monotonic() - t0
                    passes += 1
                    longest = max(longest, took / max(1, report.statements))
                    claims += report.claims
                    events += report.events
                    if report.deleted == 0:
                        break
                elapsed = time.monotonic() - started
                after = table_sizes(db)
            finally:
                connector.close()
            with psycopg.connect(pg.dsn("postgres", "bench"), autocommit=True,
                                 row_factory=dict_row) as conn:
                conn.execute("VACUUM qinglong.trigger_schedule_claims, qinglong.run_events")
                mb_after = {t: relation_mb(conn, t) for t in ("trigger_schedule_claims", "run_events")}
            version = pg.version()
        finally:
            pg.stop()
            pg.cleanup()
    result = {
        "command": " ".join(["python -m benchmarks.retention", *(argv or sys.argv[1:])]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": __import__("os").cpu_count(), "platform": platform.platform()},
        "postgres": version, "fsync": (fsync or {}).get("fsync"),
        "batch": PRUNE_BATCH, "statements_per_pass": PRUNE_STATEMENTS,
        "seed_s": round(seed_s, 1),
        "rows_before": before, "rows_after": after,
        "mb_before": mb_before, "mb_after_vacuum": mb_after,
        "deleted": {"claims": claims, "run_events": events},
        "passes": passes, "prune_s": round(elapsed, 2),
        "rows_per_s": round((claims + events) / elapsed) if elapsed else None,
        "mean_statement_s_worst_pass": round(longest, 3),
    }
    print(f"{'table':<26}{'rows before':>13}{'rows after':>12}{'MB before':>11}{'MB after':>10}")
    for key, table in (("claims", "trigger_schedule_claims"), ("run_events", "run_events")):
        print(f"{table:<26}{before[key]:>13,}{after[key]:>12,}{mb_before[table]:>11}"
              f"{mb_after[table]:>10}")
    print(f"deleted {claims + events:,} rows in {elapsed:.2f} s over {passes} passes: "
          f"{result['rows_per_s']:,} rows/s; worst pass {longest * 1000:.0f} ms per statement")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
