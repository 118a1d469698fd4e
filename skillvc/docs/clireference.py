"""The CLI reference: one Markdown page per ``skillvc`` command, generated from the click
commands themselves (their help text, usage and options), so it cannot fall behind them.

The MkDocs site adds the pages at build time (``skillvc.docs.mkdocs_hook``); nothing is
written to ``docs/``.
"""

from __future__ import annotations

import click

WIDTH = 88  # columns of the help text on a page


def _help(command: click.Command, name: str, parent: click.Context) -> str:
    ctx = click.Context(
        command, info_name=name, parent=parent, terminal_width=WIDTH, max_content_width=WIDTH
    )
    return command.get_help(ctx)


def pages() -> dict[str, str]:
    """``{command name: Markdown}`` for every command, and ``index`` listing them."""
    from skillvc.cli import cli

    root = click.Context(cli, info_name="skillvc", terminal_width=WIDTH, max_content_width=WIDTH)
    out: dict[str, str] = {}
    rows = []
    for name in sorted(cli.commands):
        command = cli.commands[name]
        summary = command.get_short_help_str(limit=120)
        rows.append(f"| [`skillvc {name}`]({name}.md) | {summary} |")
        lines = [
            f"# skillvc {name}",
            "",
            "<!-- Generated from the click command by skillvc/docs/clireference.py. -->",
            "",
            "```text",
            _help(command, name, root).rstrip(),
            "```",
        ]
        if isinstance(command, click.Group):  # e.g. `skillvc hooks install`
            group = click.Context(command, info_name=name, parent=root)
            for sub in sorted(command.commands):
                lines += [
                    "",
                    f"## skillvc {name} {sub}",
                    "",
                    "```text",
                    _help(command.commands[sub], sub, group).rstrip(),
                    "```",
                ]
        out[name] = "\n".join(lines) + "\n"
    out["index"] = "\n".join(
        [
            "# Command reference",
            "",
            "Every `skillvc` command with its options, as `skillvc COMMAND --help` prints them. "
            "Generated from the commands themselves when the site is built.",
            "",
            "```text",
            cli.get_help(root).rstrip(),
            "```",
            "",
            "| command | what it does |",
            "|---|---|",
            *rows,
        ]
    )
    out["index"] += "\n"
    return out
