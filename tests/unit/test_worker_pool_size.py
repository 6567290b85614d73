"""The worker's pool is sized from its slots unless ``--pool-size`` says otherwise."""

from __future__ import annotations

import pytest

from qinglong.errors import InvalidConfig
from qinglong.profiles.worker_config import load_worker_settings

URL = "postgresql://ql_worker@127.0.0.1:5432/qinglong"


def settings(**flags: object) -> int:
    return load_worker_settings({"database_url": URL, "worker_id": "w1", **flags}).connections


@pytest.mark.parametrize(("slots", "connections"), [
    (1, 4), (4, 4), (5, 4), (6, 5), (16, 10), (60, 32), (256, 32)])
def test_the_default_pool_grows_with_the_slots_within_4_to_32(slots: int,
                                                              connections: int) -> None:
    assert settings(slots=slots) == connections


def test_an_explicit_pool_size_wins_over_the_slots() -> None:
    assert settings(slots=16, pool_size=2) == 2
    assert settings(slots=1, pool_size=64) == 64


@pytest.mark.parametrize("size", [1, 65])
def test_a_pool_size_out_of_range_is_refused_by_its_flag(size: int) -> None:
    with pytest.raises(InvalidConfig) as caught:
        settings(pool_size=size)
    assert caught.value.message.startswith("--pool-size")
