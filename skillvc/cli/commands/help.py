"""``skillvc help [TOPIC]``: longer help than ``--help``; ``skillvc help terms`` is the glossary."""

from __future__ import annotations

import click

from skillvc.terminal.pager import screen_options

TOPICS = {"terms": "the words skillvc prints, in plain terms (docs/glossary.md)"}


@click.command("help")
@click.argument("topic", required=False, metavar="[TOPIC]", type=click.Choice(sorted(TOPICS)))
@screen_options
def command(topic: str | None) -> None:
    """Help on a topic; 'skillvc help terms' explains every word skillvc prints.

    Without a topic: the list of topics and the commands (skillvc --help).
    Example: skillvc help terms
    """
    if topic == "terms":
        from skillvc.cli.glossary import text

        click.echo(text(), nl=False)
        return
    ctx = click.get_current_context()
    assert ctx.parent is not None
    click.echo(ctx.parent.get_help())
    click.echo("\nHelp topics (skillvc help TOPIC):")
    for name, what in TOPICS.items():
        click.echo(f"  {name:<8} {what}")
