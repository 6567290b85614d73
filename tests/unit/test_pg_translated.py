"""A backend terminated while a replica or worker checks the database before activating
(`ql control`, `ql worker`) is a lost connection that the process retries, not a traceback
(found by F7 in a clean-clone run: the replica crashed with AdminShutdown)."""

from __future__ import annotations

import psycopg.errors
import pytest

from qinglong.errors import ConnectionLost
from qinglong.storage.postgres.errors import translated


def test_a_terminated_backend_inside_the_check_is_a_lost_connection() -> None:
    with pytest.raises(ConnectionLost) as caught, translated("check the database"):
        raise psycopg.errors.AdminShutdown("terminating connection due to administrator command")
    assert isinstance(caught.value.__cause__, psycopg.errors.AdminShutdown)


def test_what_is_not_a_driver_error_passes_through() -> None:
    with pytest.raises(KeyError), translated("check the database"):
        raise KeyError("not the database's")
