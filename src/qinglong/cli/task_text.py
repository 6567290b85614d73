"""A task's values as `ql task show`, `ql task list` and `ql task diff` print them: the
command as it runs, durations with units, the retry policy in words, yes/no."""

from __future__ import annotations

from collections.abc import Callable, Mapping

# The view's fields (service/views.py) by the names `ql task show` gives them.
_LABELS = {"working_directory": "cwd", "timeout_ms": "timeout", "concurrency": "limit"}


def command_text(view: Mapping[str, object]) -> str:
    """``view`` holds ``command`` (a task view) or is the command view itself."""
    command = view.get("command", view)
    assert isinstance(command, dict)
    if command["kind"] == "argv":
        return " ".join(str(word) for word in command["argv"])
    shell = "" if command["shell"] == "/bin/sh" else f"[{command['shell']}] "
    return f"{shell}{command['command']}"


def timeout_text(ms: object) -> str:
    assert isinstance(ms, int)
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def retry_text(retry: object) -> str:
    assert isinstance(retry, dict)
    if retry["max_attempts"] == 1:
        return "no (1 attempt)"
    codes = retry["on_exit_codes"]
    on = "any failure" if codes == "any" else "exit " + ",".join(str(c) for c in codes)
    return (f"up to {retry['max_attempts']} attempts on {on}"
            + (" or timeout" if retry["on_timeout"] else "")
            + f", backoff {timeout_text(retry['backoff_ms'])}"
            + f" .. {timeout_text(retry['max_backoff_ms'])}")


def _yes_no(value: object) -> str:
    return "yes" if value else "no"


def limit_text(value: object) -> str:
    return "none" if value is None else f"{value} at once"


def cwd_text(value: object) -> str:
    return "(the executor directory)" if value is None else str(value)


_VALUES: dict[str, Callable[[object], str]] = {
    "command": lambda value: command_text({"command": value}),
    "timeout_ms": timeout_text, "retry": retry_text, "enabled": _yes_no,
    "idempotent": _yes_no, "concurrency": limit_text, "working_directory": cwd_text,
}


def change_text(change: Mapping[str, object]) -> str:
    """One change of a task's revision diff: ``timeout: 1h -> 5m``, ``env.TOKEN: (set) ->
    -`` (an environment entry's value never shows)."""
    field = str(change["field"])
    render = _VALUES.get(field)
    if field.startswith("environment."):
        label = "env." + field.split(".", 1)[1]
    else:
        label = _LABELS.get(field, field)

    def text(value: object) -> str:
        if render is not None:
            return render(value)
        return "-" if value is None else str(value)

    return f"{label}: {text(change['from'])} -> {text(change['to'])}"
