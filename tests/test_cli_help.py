"""Every command explains itself: help text with an example, and no command is left out."""

from __future__ import annotations

import click
from click.testing import CliRunner

from skillvc.cli import cli


def _leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _leaf_commands(command, (*prefix, name))
        else:
            yield (*prefix, name)


def test_every_command_has_help_with_an_example() -> None:
    commands = list(_leaf_commands(cli))
    names = {c[0] for c in commands}
    assert {
        "init",
        "train",
        "log",
        "show",
        "runs",
        "demo",
        "eval",
        "check",
        "report",
        "diff",
        "blame",
        "doctor",
        "validate",
        "hooks",
    } <= names
    for path in commands:
        result = CliRunner().invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, path
        assert "Example" in result.output, f"skillvc {' '.join(path)} --help has no example"
