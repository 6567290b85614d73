"""Jittered instants for ``ql audit``, computed independently of ``qinglong.domain.jitter``.

A trigger whose spec config has ``jitter`` (``{"maxSeconds": B, "randomSeconds": R}``) runs
each occurrence ``n`` at ``n + offset`` seconds, where, as documented in
``docs/controls/triggers.md``:

* ``offset = stable + random``;
* ``stable = H(prefix, project, trigger) mod (B - R + 1)``;
* ``random = H(prefix, project, trigger, n in epoch ms) mod (room + 1)``, ``room = min(R,
  seconds to the next occurrence - 1)`` (``R`` when there is no next occurrence);
* ``H`` is the first 8 bytes, big-endian, of the SHA-256 of the parts joined by NUL bytes, and
  ``prefix`` is ``qinglong.jitter.v1``.

The audit recomputes the offsets from that definition (it shares no code with the scheduler)
and judges each occurrence at its jittered instant: it must not be admitted before it, its lag
counts from it, the misfire grace and pauses apply to it, and it lies within ``B`` of the
nominal instant by construction (a spec whose bounds are broken is refused).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Mapping, Sequence

_PREFIX = b"qinglong.jitter.v1"
_LONGEST_S = 3_600


def jitter_bounds(config: Mapping[str, object]) -> tuple[int, int] | None:
    """``(B, R)`` in seconds from a spec config, None without jitter; ValueError when the
    stored bounds are not a jitter's (0 < B <= 1 h, 0 <= R <= B)."""
    jitter = config.get("jitter")
    if jitter is None:
        return None
    if not isinstance(jitter, Mapping):
        raise TypeError("jitter is not an object")
    bound, random = jitter.get("maxSeconds"), jitter.get("randomSeconds")
    if (not isinstance(bound, int) or not isinstance(random, int) or isinstance(bound, bool)
            or isinstance(random, bool) or not 0 < bound <= _LONGEST_S
            or not 0 <= random <= bound):
        raise ValueError(f"jitter bounds {bound!r}, {random!r} are out of range")
    return bound, random


def _h(*parts: str) -> int:
    digest = hashlib.sha256(b"\x00".join([_PREFIX, *(p.encode("utf-8") for p in parts)]))
    (value,) = struct.unpack(">Q", digest.digest()[:8])
    return int(value)


def jittered_instants(bounds: tuple[int, int], project_id: str, trigger_id: str,
                      occurrences: Sequence[int],
                      following: Callable[[int], int | None]) -> dict[int, int]:
    """Each occurrence (sorted, epoch ms) -> the instant it is due. ``following(n)`` is the
    occurrence after ``n`` (asked only for the last one, and only when R > 0)."""
    bound, random = bounds
    stable = _h(project_id, trigger_id) % (bound - random + 1)
    due: dict[int, int] = {}
    for index, nominal in enumerate(occurrences):
        room = random
        if random:
            after = occurrences[index + 1] if index + 1 < len(occurrences) else following(nominal)
            if after is not None:
                room = min(room, (after - nominal) // 1000 - 1)
        drawn = _h(project_id, trigger_id, str(nominal)) % (max(room, 0) + 1)
        due[nominal] = nominal + (stable + drawn) * 1000
    return due
