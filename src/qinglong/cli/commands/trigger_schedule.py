"""The options of `ql trigger publish` and `ql trigger preview` that state a schedule, and how
the trigger commands write one out: checked before the database is opened, naming the option
that is wrong."""

from __future__ import annotations

from typing import Any

import click

from qinglong.cli.params import WholeSeconds
from qinglong.domain.cron import (
    DstGap,
    DstOverlap,
    DstPolicy,
    check_dst_applies,
    normalize_expression,
)
from qinglong.domain.interval import MAX_EVERY_S, check_every, format_every
from qinglong.domain.jitter import Jitter
from qinglong.domain.occurrences import instant_text
from qinglong.domain.parameters import parse_values
from qinglong.domain.trigger import DEFAULT_QUEUE_LIMIT, Overlap, OverlapPolicy, text_kind
from qinglong.errors import InvalidInput
from qinglong.service.views.triggers import TriggerRevisionView

EVERY_HELP = (f"Run every DURATION (whole seconds, 1s to {format_every(MAX_EVERY_S)}): 90s, "
               "5m, 1h30m, 1d. Counted on real time from --anchor: daylight saving time never "
               "moves, skips or doubles a run.")
ANCHOR_HELP = ("With --every: the instant the intervals count from (RFC 3339, epoch ms, or a "
                "duration from now such as 10m). Default: the publish time for a new interval "
                "trigger (it runs at once); an interval trigger keeps its anchor.")
AT_HELP = ("Run once, at TIME: RFC 3339 with an offset (2026-12-24T18:00:00+08:00), epoch ms, "
            "or a duration from now (2h). After it the trigger is done.")
JITTER_HELP = ("Run each occurrence up to DURATION after its nominal time (0s to 1h; 0s: no "
                "jitter), by a stable offset per trigger (a hash of its id) plus --jitter-random.")
JITTER_RANDOM_HELP = ("The part of --jitter drawn anew for each occurrence (a hash of the "
                       "trigger and the occurrence, the same on every replica); default 0s.")
DST_GAP_HELP = ("With a wall-clock --cron (fixed second, minute and hour): a time that a "
                 "spring-forward gap skips runs at the end of the gap (shift, the default) or "
                 "not at all (skip).")
DST_OVERLAP_HELP = ("With a wall-clock --cron: a time that a fall-back overlap repeats runs "
                     "once at its first instant (first, the default), once at its second "
                     "(second), or at both (both).")


def schedule_text(cron: str | None, every_s: int | None, anchor_ms: int | None,
                  at_ms: int | None) -> str | None:
    """The schedule a command line asks for, as the text a publish takes (None: keep)."""
    given = [name for name, value in (("--cron", cron), ("--every", every_s), ("--at", at_ms))
             if value is not None]
    if len(given) > 1:
        raise click.UsageError(f"{' and '.join(given)} exclude each other: give one schedule")
    if anchor_ms is not None and every_s is None:
        raise click.UsageError("--anchor applies to --every (give both)")
    if cron is not None:
        return normalize_expression(cron)  # fail fast, before the database is opened
    if every_s is not None:
        try:
            check_every(every_s)
        except InvalidInput as exc:
            raise click.BadParameter(exc.rule, param_hint="'--every'") from None
        anchor = "" if anchor_ms is None else f" from {instant_text(anchor_ms)}"
        return f"every {format_every(every_s)}{anchor}"
    if at_ms is not None:
        return f"at {instant_text(at_ms)}"
    return None


def dst_and_jitter_options(func: Any) -> Any:
    """How a schedule meets daylight saving time and its jitter: the same options, with the
    same meaning, for publishing a trigger and for previewing one."""
    func = click.option("--jitter-random", "jitter_random_s", type=WholeSeconds(),
                        metavar="DURATION", help=JITTER_RANDOM_HELP)(func)
    func = click.option("--jitter", "jitter_s", type=WholeSeconds(), metavar="DURATION",
                        help=JITTER_HELP)(func)
    func = click.option("--dst-overlap", type=click.Choice([o.value for o in DstOverlap]),
                        help=DST_OVERLAP_HELP)(func)
    return click.option("--dst-gap", type=click.Choice([g.value for g in DstGap]),
                        help=DST_GAP_HELP)(func)


def check_dst(expression: str | None, gap: str | None, overlap: str | None) -> None:
    """Fail fast, naming the option, when a DST policy is given for a schedule it cannot
    apply to (an interval or one-shot schedule, or a cron interval expression)."""
    if (gap is None and overlap is None) or expression is None:
        return
    option = "'--dst-gap'" if gap not in (None, "shift") else "'--dst-overlap'"
    if text_kind(expression) != "cron":
        raise click.BadParameter("applies to --cron triggers (--every and --at follow real "
                                 "elapsed time)", param_hint=option)
    try:
        check_dst_applies(expression, DstPolicy.parse(gap, overlap))
    except InvalidInput as exc:
        raise click.BadParameter(exc.rule, param_hint=option) from None


def check_jitter(jitter_s: int | None, random_s: int | None) -> Jitter | None:
    """The jitter the options state (None: none, or not given), checked before the database
    is opened. A --jitter-random without --jitter is checked by the publish (it may add to
    the trigger's current jitter)."""
    if jitter_s is None:
        return None
    try:
        return Jitter.of(jitter_s, random_s or 0)
    except InvalidInput as exc:
        raise click.BadParameter(exc.rule, param_hint=f"'--{exc.field}'") from None


def schedule_summary(view: TriggerRevisionView) -> str:
    """The schedule as lists show it: its text, and a cron trigger's DST policy when it is not
    the default (``30 2 * * * (DST gap skip, overlap both)``)."""
    dst = view.dst
    text = view.schedule
    if dst is not None and (dst.gap, dst.overlap) != ("shift", "first"):
        text += f" (DST gap {dst.gap}, overlap {dst.overlap})"
    jitter = view.jitter
    if jitter is not None:
        random = f", {seconds(jitter.random_s)} random" if jitter.random_s else ""
        text += f" (jitter {seconds(jitter.max_s)}{random})"
    return text


def seconds(value: int) -> str:
    return format_every(value) if value else "0s"


def overlap_of(policy: str | None, queue_limit: int | None) -> Overlap | None:
    if policy is None:
        if queue_limit is not None:
            raise InvalidInput("overlap-queue-limit", "give it with --overlap queue")
        return None  # keep the current policy
    return Overlap(policy=OverlapPolicy(policy),
                   queue_limit=DEFAULT_QUEUE_LIMIT if queue_limit is None else queue_limit)



def param_values(params: tuple[str, ...], clear: bool) -> dict[str, object] | None:
    """The values ``--param NAME=VALUE`` (repeated) and ``--no-params`` give: None keeps the
    trigger's values, ``{}`` clears them."""
    if clear and params:
        raise click.UsageError("--param and --no-params exclude each other")
    if clear:
        return {}
    if not params:
        return None
    try:
        return dict(parse_values(params))
    except InvalidInput as exc:
        raise click.BadParameter(exc.rule, param_hint="'--param'") from None
