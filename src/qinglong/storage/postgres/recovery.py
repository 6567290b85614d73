"""Startup recovery gate: a control replica activates only when nothing is half-done.

A freshly admitted Run (queued, with its untouched claimed remote_worker Attempt) is normal
work for the dispatcher, not a crash leftover; anything that drifted from that exact shape
is a candidate and blocks activation (fail closed).
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg

from qinglong.storage.postgres.connection import QUERIES, PgConnection
from qinglong.storage.postgres.errors import translate

MAX_PAGE = 128


@dataclass(frozen=True, slots=True)
class RecoveryCandidate:
    kind: str  # "attempt" or "run"
    id: str
    run_id: str
    status: str


@dataclass(frozen=True, slots=True)
class RecoveryPage:
    candidates: tuple[RecoveryCandidate, ...]
    has_more: bool

    @property
    def converged(self) -> bool:
        return not self.candidates


def recovery_candidates(conn: PgConnection, limit: int = 16) -> RecoveryPage:
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"limit must be between 1 and {MAX_PAGE}")
    try:
        rows = conn.execute(QUERIES["recovery_candidates"], {"limit": limit}).fetchall()
    except psycopg.Error as exc:
        raise translate(exc, "read recovery candidates", conn) from exc
    candidates = tuple(
        RecoveryCandidate(kind=r["kind"], id=r["id"], run_id=r["run_id"], status=r["status"])
        for r in rows
    )
    return RecoveryPage(candidates=candidates[:limit], has_more=len(candidates) > limit)
