"""What a Run records when a trigger's overlap policy ends it: the cancel reason, an error
code and a summary that names the other Run.

A Run that the policy ends never counts as a success or a failure (it is ``skipped`` in the
stats): ``skip`` (and ``queue`` with a full queue) cancels the new Run because the previous
one is still in progress; ``cancel_previous`` stops the previous Run because a new one is
due. Both carry the cancel reason ``policy`` (the vocabulary of ``runs.cancel_reason`` and
the events' ``cancel_reason``, unchanged); the error code and summary say which Run it gave
way to.
"""

from __future__ import annotations

POLICY = "policy"  # runs.cancel_reason of every Run an overlap policy ended
SKIPPED = "OVERLAP_SKIPPED"  # skip, or queue with a full queue: the new Run never ran
CANCELLED = "OVERLAP_CANCELLED"  # cancel_previous: the previous Run was stopped


def skipped_summary(policy: str, previous_run: str, *, queue_limit: int | None = None) -> str:
    """Why the overlap policy cancelled a Run before it started, naming the Run in progress."""
    if queue_limit is not None:
        return (f"skipped by the trigger's overlap policy {policy}: run {previous_run} was "
                f"still in progress and {queue_limit} Run(s) were already waiting (the queue "
                "limit)")
    return (f"skipped by the trigger's overlap policy {policy}: run {previous_run} was still "
            "in progress")


def cancelled_summary(next_run: str) -> str:
    """Why the overlap policy stopped a Run, naming the Run that was due."""
    return (f"cancelled by the trigger's overlap policy cancel_previous: run {next_run} was "
            "due")

