"""What the stores share over the kernel: a unit of work inside one transaction, stamping
rows with one reading of the store's clock (taken when first needed); a store whose every
verb runs one such unit, each write one READ COMMITTED (PostgreSQL) or ``BEGIN IMMEDIATE``
(SQLite) transaction and each read one read; and the verbs themselves.

A store's verb is a unit's method run in a transaction of its own under an action name (the
one errors and diagnostics name), declared once in the store's class body::

    user_create = writes("create user", AccountRows.user_create)

which gives ``store.user_create(params)`` the method's own parameters and result, checked
by mypy. A verb that does more than run one method is an ordinary method of the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Concatenate, Generic, ParamSpec, Protocol, TypeVar

from qinglong.ids import new_uuid
from qinglong.storage.dbapi import Params, Row
from qinglong.storage.kernel import Database, Tx

T = TypeVar("T")
P = ParamSpec("P")


class TxUnit:
    """Statements by name in ``tx``, at one reading of the store's clock."""

    def __init__(self, tx: Tx, *, new_id: Callable[[], str] = new_uuid) -> None:
        self._tx = tx
        self._now_ms: int | None = None
        self._new_id = new_id

    @property
    def now_ms(self) -> int:
        """One reading of the store's clock for the whole transaction."""
        if self._now_ms is None:
            self._now_ms = self._tx.now_ms()
        return self._now_ms

    def _one(self, name: str, params: Params | None = None) -> Row | None:
        return self._tx.one(name, params)

    def _all(self, name: str, params: Params | None = None) -> list[Row]:
        return self._tx.all(name, params)

    def _run(self, name: str, params: Params) -> int:
        return self._tx.execute(name, params).rowcount


U = TypeVar("U", bound=TxUnit)


class UnitStore(Generic[U]):
    """A store whose verbs each run one ``unit`` in a transaction of their own."""

    def __init__(self, db: Database, unit: type[U], *,
                 new_id: Callable[[], str] = new_uuid) -> None:
        self._db = db
        self._unit = unit
        self._new_id = new_id

    def _write(self, action: str, work: Callable[[U], T]) -> T:
        return self._db.write(action, lambda tx: work(self._unit(tx, new_id=self._new_id)),
                              isolation="read committed")

    def _read(self, action: str, work: Callable[[U], T]) -> T:
        return self._db.read(action, lambda tx: work(self._unit(tx, new_id=self._new_id)))

    def now_ms(self) -> int:
        return self._db.now_ms()


W_co = TypeVar("W_co", covariant=True)


class Writes(Protocol[W_co]):
    def _write(self, action: str, work: Callable[[W_co], T], /) -> T: ...


class Reads(Protocol[W_co]):
    def _read(self, action: str, work: Callable[[W_co], T], /) -> T: ...


W = TypeVar("W")


def writes(action: str,
           verb: Callable[Concatenate[W, P], T]) -> Callable[Concatenate[Writes[W], P], T]:
    """A store verb: ``verb`` run on the store's unit in a write transaction of its own."""

    def run(self: Writes[W], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._write(action, lambda unit: verb(unit, *args, **kwargs))

    return _named(run, verb)


def reads(action: str,
          verb: Callable[Concatenate[W, P], T]) -> Callable[Concatenate[Reads[W], P], T]:
    """A store verb: ``verb`` run on the store's unit in a read of its own."""

    def run(self: Reads[W], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._read(action, lambda unit: verb(unit, *args, **kwargs))

    return _named(run, verb)


F = TypeVar("F", bound=Callable[..., object])


def _named(run: F, verb: Callable[..., object]) -> F:
    run.__name__ = getattr(verb, "__name__", run.__name__)
    run.__doc__ = verb.__doc__
    return run
