"""The jittered instant of a scheduled admission, kept with the Run.

A Run's ``scheduled_for`` is its occurrence's nominal instant (its identity); for a trigger
with jitter (``domain/jitter.py``) the instant the occurrence became due is recorded beside
it, as ``jittered_for_ms`` in the payload of the Run's ``run.created`` event.
"""

from __future__ import annotations

from dataclasses import replace

from qinglong.domain.admission import AdmissionRows


def with_jittered_instant(rows: AdmissionRows, jittered_for_ms: int | None) -> AdmissionRows:
    """``rows`` with the jittered instant in run.created's payload (unchanged without one)."""
    if jittered_for_ms is None:
        return rows
    created, queued = rows.events
    payload = created["payload"]
    assert isinstance(payload, dict)
    return replace(rows, events=({**created, "payload": {**payload,
                                                          "jittered_for_ms": jittered_for_ms}},
                                 queued))
