"""A task's values as `ql task show`, `ql task list` and `ql task diff` print them: the
command as it runs, durations with units, the retry policy in words, yes/no."""

from __future__ import annotations

import json
from collections.abc import Callable

from qinglong.domain.limits import format_size
from qinglong.service.views.tasks import Change, CommandView, RetryView

# The view's fields (service.views.tasks) by the names `ql task show` gives them.
_LABELS = {"working_directory": "cwd", "timeout_ms": "timeout", "concurrency": "limit",
           "memory_limit_bytes": "memory", "cpu_limit_s": "cpu"}


def command_text(command: CommandView) -> str:
    """The command as it runs: its argv, or its shell text (with the shell unless /bin/sh)."""
    if command.kind in ("argv", "repo", "deps"):  # repo, deps: what the executor starts
        return " ".join(command.argv or ())
    if command.kind == "script":
        return " ".join(command.argv or ()) + f"  (script @{(command.digest or '')[:12]})"
    shell = "" if command.shell == "/bin/sh" else f"[{command.shell}] "
    return f"{shell}{command.command}"


def timeout_text(ms: object) -> str:
    assert isinstance(ms, int)
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def retry_text(retry: RetryView) -> str:
    if retry.max_attempts == 1:
        return "no (1 attempt)"
    codes = retry.on_exit_codes
    on = "any failure" if codes == "any" else "exit " + ",".join(str(c) for c in codes)
    return (f"up to {retry.max_attempts} attempts on {on}"
            + (" or timeout" if retry.on_timeout else "")
            + f", backoff {timeout_text(retry.backoff_ms)}"
            + f" .. {timeout_text(retry.max_backoff_ms)}")


def _yes_no(value: object) -> str:
    return "yes" if value else "no"


def limit_text(value: object) -> str:
    return "none" if value is None else f"{value} at once"


def memory_text(value: object) -> str:
    return "none" if value is None else format_size(int(value))  # type: ignore[call-overload]


def parameters_text(value: object) -> str:
    """``count (integer, default 3), region (string, default "eu")``, or ``none``."""
    assert isinstance(value, list)
    return ", ".join(f"{p['name']} ({p['type']}, default {json.dumps(p['default'])})"
                     for p in (dict(v) for v in value)) or "none"


def cpu_text(value: object) -> str:
    return "none" if value is None else f"{value} s of CPU time"


def requires_text(value: object) -> str:
    """A task's required worker labels: ``gpu, region=eu``, or ``any worker``."""
    assert isinstance(value, list)
    return ", ".join(str(v) for v in value) or "any worker"


def cwd_text(value: object) -> str:
    return "(the executor directory)" if value is None else str(value)


# A change carries a command's and a retry policy's JSON forms (as ``--json`` shows them).
_VALUES: dict[str, Callable[[object], str]] = {
    "command": lambda value: command_text(CommandView.model_validate(value)),
    "timeout_ms": timeout_text, "retry": lambda value: retry_text(RetryView.model_validate(value)),
    "enabled": _yes_no,
    "idempotent": _yes_no, "concurrency": limit_text, "working_directory": cwd_text,
    "requires": requires_text, "memory_limit_bytes": memory_text, "cpu_limit_s": cpu_text,
    "parameters": parameters_text,
}


def change_text(change: Change) -> str:
    """One change of a task's revision diff: ``timeout: 1h -> 5m``, ``env.TOKEN: (set) ->
    -`` (an environment entry's value never shows)."""
    field = change.field
    render = _VALUES.get(field)
    if field.startswith("environment."):
        label = "env." + field.split(".", 1)[1]
    else:
        label = _LABELS.get(field, field)

    def text(value: object) -> str:
        if render is not None:
            return render(value)
        return "-" if value is None else str(value)

    return f"{label}: {text(change.from_)} -> {text(change.to)}"
