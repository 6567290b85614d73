"""Retry policies: what retries, how long it waits, and their canonical JSON."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qinglong.domain.retry import Ending, RetryPolicy, should_retry
from qinglong.domain.runs import AttemptStatus
from qinglong.domain.task import CommandSpec, ShellCommand, parse_command_config
from qinglong.errors import InvalidInput

THREE = RetryPolicy(max_attempts=3, backoff_ms=1_000, max_backoff_ms=5_000)


def retries(policy: RetryPolicy, ending: Ending, *, spent: int = 1, idempotent: bool = False,
            cancel: bool = False) -> bool:
    return should_retry(policy, idempotent=idempotent, ending=ending, spent=spent,
                        cancel_requested=cancel)


FAILED = Ending(status=AttemptStatus.FAILED, exit_code=1, error_code="EXIT_NONZERO")


def test_what_retries_by_default_and_what_never_does() -> None:
    assert retries(THREE, FAILED)
    assert retries(THREE, Ending(status=AttemptStatus.FAILED, error_code="KILLED_BY_SIGNAL"))
    assert not retries(THREE, Ending(status=AttemptStatus.FAILED,
                                     error_code="EXECUTION_REVISION_INVALID"))
    assert not retries(THREE, Ending(status=AttemptStatus.TIMED_OUT))
    assert not retries(THREE, Ending(status=AttemptStatus.SUCCEEDED, exit_code=0))
    assert not retries(THREE, Ending(status=AttemptStatus.CANCELLED))
    assert not retries(THREE, FAILED, cancel=True)  # a cancel request wins
    assert not retries(RetryPolicy(), FAILED)  # one attempt: no retry


def test_attempts_are_bounded() -> None:
    assert retries(THREE, FAILED, spent=2)
    assert not retries(THREE, FAILED, spent=3)


def test_lost_attempts_retry_only_for_idempotent_tasks() -> None:
    lost = Ending(status=AttemptStatus.LOST)
    assert not retries(THREE, lost)
    assert retries(THREE, lost, idempotent=True)


def test_exit_codes_and_timeouts_are_chosen() -> None:
    picky = RetryPolicy(max_attempts=2, on_exit_codes=(75, 3), on_timeout=True)
    assert picky.on_exit_codes == (3, 75)
    assert retries(picky, Ending(status=AttemptStatus.FAILED, exit_code=75))
    assert not retries(picky, Ending(status=AttemptStatus.FAILED, exit_code=1))
    assert not retries(picky, Ending(status=AttemptStatus.FAILED, error_code="KILLED_BY_SIGNAL"))
    assert retries(picky, Ending(status=AttemptStatus.TIMED_OUT))


def test_backoff_doubles_up_to_its_cap_with_bounded_jitter() -> None:
    assert [THREE.delay_ms(n, 1.0) for n in (1, 2, 3, 4, 10)] == [1_000, 2_000, 4_000, 5_000,
                                                                 5_000]
    assert THREE.delay_ms(1, 0.8) == 800 and THREE.delay_ms(1, 1.2) == 1_200
    assert THREE.delay_ms(1, 9.0) == 1_200  # jitter is clamped


@given(st.integers(1, 100), st.floats(0.0, 5.0))
def test_delays_stay_within_the_policy(spent: int, jitter: float) -> None:
    delay = THREE.delay_ms(spent, jitter)
    assert 800 <= delay <= 6_000


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"max_attempts": 0}, "max-attempts"), ({"max_attempts": 101}, "max-attempts"),
    ({"backoff_ms": 10}, "retry-backoff"), ({"max_backoff_ms": 10}, "retry-max-backoff"),
    ({"backoff_ms": 5_000, "max_backoff_ms": 1_000}, "retry-max-backoff"),
    ({"on_exit_codes": (0,)}, "retry-on-exit"), ({"on_exit_codes": (256,)}, "retry-on-exit"),
])
def test_bad_policies_are_refused(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_the_spec_json_keeps_old_revisions_canonical() -> None:
    plain = CommandSpec(command=ShellCommand(command="true"))
    assert set(plain.config_json()) == {"command", "environment", "timeoutMs"}
    tuned = CommandSpec(command=ShellCommand(command="true"), retry=THREE, idempotent=True,
                        concurrency=2)
    config = tuned.config_json()
    assert config["retry"] == {"maxAttempts": 3, "backoffMs": 1000, "maxBackoffMs": 5000,
                               "onExitCodes": [], "onTimeout": False}
    assert (config["idempotent"], config["concurrency"]) == (True, 2)
    assert parse_command_config(config) == tuned
    with pytest.raises(InvalidInput, match="canonical"):
        parse_command_config({**plain.config_json(), "retry": RetryPolicy().to_json()})
    with pytest.raises(InvalidInput, match="only as true"):
        parse_command_config({**plain.config_json(), "idempotent": False})
