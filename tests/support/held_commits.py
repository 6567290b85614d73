"""Lost COMMIT replies on demand: a COMMIT held on an advisory lock the test holds, so the
client's deadline always passes first (no sleep racing a timer)."""

from __future__ import annotations

from typing import Self

from tests.support.pg import PgTestDatabase

HOLD_KEY = 7_301_442  # advisory locks are per database: other tests' databases never meet it


class HeldCommits:
    """Hold every COMMIT that fires a deferred constraint trigger (``event``; by default:
    every inserted Run) inside COMMIT, on an advisory lock this test holds on a connection of
    its own: the reply can never beat the client's deadline, so it is always lost, and the
    commit lands only once `release` lets it (or, at the latest, once the block is left).
    The trigger waits for the lock past the session's lock_timeout, but at most a minute, so
    a client whose deadline failed to cut the wait fails the test instead of hanging it."""

    def __init__(self, db: PgTestDatabase, event: str = "AFTER INSERT ON runs") -> None:
        self._db, self._event = db, event
        self._holder = db.server.connect(db.name)
        self._held = False

    def __enter__(self) -> Self:
        self.hold()
        self._db.execute(
            "CREATE FUNCTION qinglong.held_commit() RETURNS trigger LANGUAGE plpgsql "
            "SET lock_timeout = '60s' AS "
            f"$$ BEGIN PERFORM pg_advisory_xact_lock({HOLD_KEY}); RETURN NULL; END $$")
        self._db.execute(f"CREATE CONSTRAINT TRIGGER held_commit {self._event} "
                         "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW "
                         "EXECUTE FUNCTION qinglong.held_commit()")
        return self

    def __exit__(self, *_exc: object) -> None:
        try:
            if not self._holder.broken:  # a broken session's backend is gone, and its lock
                self.release()  # answered by the server, so released before this returns
        finally:
            self._holder.close()

    def hold(self) -> None:
        if not self._held:
            self._holder.execute("SELECT pg_advisory_lock(%s)", [HOLD_KEY])
            self._held = True

    def release(self) -> None:
        if self._held:
            self._holder.execute("SELECT pg_advisory_unlock(%s)", [HOLD_KEY])
            self._held = False
