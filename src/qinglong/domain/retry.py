"""Retries: which outcomes of an Attempt run the Run again, and after how long.

A retry is durable state, never an in-memory sleep: the Run waits in ``retry_wait`` until
``retry_at_ms`` and is then queued with a new Attempt. The delay doubles with every attempt
spent (``backoff_ms``, ``2 * backoff_ms``, ... up to ``max_backoff_ms``), times a random factor
between 0.8 and 1.2 so a burst of failures does not come back as a burst.

What retries: a failed exit (any non-zero code, or only the codes in ``on_exit_codes``), a
command killed by a signal or that could not start (when any failure retries), a timeout
when ``on_timeout``, and a lost Attempt (its executor vanished mid-run) only for a task
marked idempotent. A cancelled Run never retries, and an interrupted one (its worker was
drained) is queued again without spending an attempt.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from qinglong.domain.runs import AttemptStatus
from qinglong.errors import InvalidInput

MAX_ATTEMPTS = 100
MIN_BACKOFF_MS = 100
MAX_BACKOFF_MS = 86_400_000
DEFAULT_BACKOFF_MS = 10_000
DEFAULT_MAX_BACKOFF_MS = 600_000
JITTER = (0.8, 1.2)
NEVER_RETRIED = frozenset({"EXECUTION_REVISION_INVALID"})  # the plan itself is bad


def _int(value: object, field_name: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidInput(field_name, f"must be an integer between {low} and {high}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    max_attempts: int = 1  # 1: no retry
    backoff_ms: int = DEFAULT_BACKOFF_MS
    max_backoff_ms: int = DEFAULT_MAX_BACKOFF_MS
    on_exit_codes: tuple[int, ...] = field(default=())  # empty: any failure
    on_timeout: bool = False

    def __post_init__(self) -> None:
        _int(self.max_attempts, "max-attempts", 1, MAX_ATTEMPTS)
        _int(self.backoff_ms, "retry-backoff", MIN_BACKOFF_MS, MAX_BACKOFF_MS)
        _int(self.max_backoff_ms, "retry-max-backoff", MIN_BACKOFF_MS, MAX_BACKOFF_MS)
        if self.max_backoff_ms < self.backoff_ms:
            raise InvalidInput("retry-max-backoff", "must not be shorter than the first backoff")
        codes = tuple(sorted(set(self.on_exit_codes)))
        for code in codes:
            _int(code, "retry-on-exit", 1, 255)
        object.__setattr__(self, "on_exit_codes", codes)

    @property
    def default(self) -> bool:
        return self == RetryPolicy()

    def to_json(self) -> dict[str, object]:
        return {"maxAttempts": self.max_attempts, "backoffMs": self.backoff_ms,
                "maxBackoffMs": self.max_backoff_ms, "onExitCodes": list(self.on_exit_codes),
                "onTimeout": self.on_timeout}

    @classmethod
    def parse(cls, value: object) -> RetryPolicy:
        if not isinstance(value, Mapping):
            raise InvalidInput("retry", "must be an object")
        expected = {"maxAttempts", "backoffMs", "maxBackoffMs", "onExitCodes", "onTimeout"}
        if set(value) != expected:
            raise InvalidInput("retry", "must have exactly " + ", ".join(sorted(expected)))
        codes = value["onExitCodes"]
        if not isinstance(codes, list):
            raise InvalidInput("retry-on-exit", "must be a list of exit codes")
        on_timeout = value["onTimeout"]
        if not isinstance(on_timeout, bool):
            raise InvalidInput("retry-on-timeout", "must be true or false")
        return cls(max_attempts=value["maxAttempts"], backoff_ms=value["backoffMs"],
                   max_backoff_ms=value["maxBackoffMs"], on_exit_codes=tuple(codes),
                   on_timeout=on_timeout)

    def delay_ms(self, spent: int, jitter: float) -> int:
        """The wait before the attempt after ``spent`` attempts (``jitter`` in JITTER)."""
        low, high = JITTER
        factor = min(max(jitter, low), high)
        base = min(self.max_backoff_ms, self.backoff_ms * 2 ** min(max(spent - 1, 0), 40))
        return max(1, int(base * factor))


@dataclass(frozen=True, slots=True, kw_only=True)
class Ending:
    """How an Attempt ended, as far as retrying is concerned."""

    status: AttemptStatus  # failed | timed_out | lost | succeeded | cancelled
    exit_code: int | None = None
    error_code: str | None = None


def should_retry(policy: RetryPolicy, *, idempotent: bool, ending: Ending, spent: int,
                 cancel_requested: bool) -> bool:
    """Whether the Run gets another Attempt, ``spent`` attempts having been used (this one
    included)."""
    if cancel_requested or spent >= policy.max_attempts:
        return False
    if ending.status is AttemptStatus.LOST:
        return idempotent
    if ending.status is AttemptStatus.TIMED_OUT:
        return policy.on_timeout
    if ending.status is not AttemptStatus.FAILED or ending.error_code in NEVER_RETRIED:
        return False
    if ending.exit_code is not None and policy.on_exit_codes:
        return ending.exit_code in policy.on_exit_codes
    return not policy.on_exit_codes
