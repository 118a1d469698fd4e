"""``skillvc runs``: the runs table."""

from __future__ import annotations

import click

from skillvc.review.output import (
    echo_listing,
    json_option,
    skill_option,
    table_options,
)
from skillvc.terminal.fit import fits_terminal, terminal_width


@click.command()
@click.option(
    "-n",
    "--max-count",
    "limit",
    type=click.IntRange(min=1, max=2**63 - 1),  # SQLite's largest integer
    metavar="N",
    help="Show at most N runs.",
)
@click.option(
    "--all", "show_all", is_flag=True, help="Also list abandoned runs (replaced by a new one)."
)
@skill_option
@json_option
@table_options
@fits_terminal
def runs(
    limit: int | None,
    show_all: bool,
    skill: str | None,
    as_json: bool,
    table_format: str | None,
) -> None:
    """Training runs with their scores, calls, tokens and cost.

    Example: skillvc runs --json
    """
    from skillvc.review.output import format_runs
    from skillvc.review.runs import RUN_KEYS, list_runs
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(skill=skill, any_skill=True)
    with ws.store() as store:
        rows = list_runs(
            store,
            limit,
            ws.config.skill.path if skill is not None else None,
            abandoned=show_all,
        )
    none = "No runs yet; start one with 'skillvc train'."
    if echo_listing(rows, as_json, table_format, RUN_KEYS, none):
        return
    click.echo(format_runs(rows, terminal_width()))


command = runs
