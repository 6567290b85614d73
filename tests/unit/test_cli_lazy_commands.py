"""`ql` imports a command's module only when that command is asked for: every name resolves to
its command with its subcommands, and the processes that run for days (`ql control`, `ql
worker`) load none of the services the panel and the definition commands use."""

from __future__ import annotations

import subprocess
import sys

import click

from qinglong.cli.main import COMMANDS, cli

HEAVY = ("qinglong.service.container", "qinglong.service.accounts", "qinglong.web", "argon2")


def test_every_command_resolves_by_its_own_name() -> None:
    ctx = click.Context(cli)
    assert cli.list_commands(ctx) == sorted(COMMANDS)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert isinstance(command, click.Command) and command.name == name
    assert cli.get_command(ctx, "no-such-command") is None


def test_subcommands_added_by_other_modules_are_there() -> None:
    ctx = click.Context(cli)
    trigger = cli.get_command(ctx, "trigger")
    task = cli.get_command(ctx, "task")
    assert isinstance(trigger, click.Group) and isinstance(task, click.Group)
    assert {"backfill", "ledger", "fire"} <= set(trigger.list_commands(ctx))
    assert "run" in task.list_commands(ctx)


def loaded_after(*names: str) -> set[str]:
    """The modules a fresh interpreter holds after resolving ``names`` (and their profile)."""
    script = (
        "import sys, click\n"
        "from qinglong.cli.main import cli\n"
        "ctx = click.Context(cli)\n"
        f"for name in {names!r}:\n"
        "    assert cli.get_command(ctx, name) is not None\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    return set(out.split())


def test_control_and_worker_load_none_of_the_services() -> None:
    for name in ("control", "worker"):
        loaded = loaded_after(name)
        assert f"qinglong.cli.commands.{name}" in loaded
        assert not {m for m in loaded if m.startswith(HEAVY)}, name
        assert "qinglong.cli.commands.trigger" not in loaded


def test_a_definition_command_loads_what_it_needs() -> None:
    loaded = loaded_after("trigger")
    assert {"qinglong.cli.commands.backfill", "qinglong.cli.commands.manual"} <= loaded
