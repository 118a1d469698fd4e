"""``skillvc log``: the gates of the runs, accepted and rejected candidates."""

from __future__ import annotations

from typing import Any

import click

from skillvc.review.output import (
    echo_listing,
    format_log_entry,
    json_option,
    skill_option,
    table_options,
)
from skillvc.terminal.pager import screen_options


@click.command()
@click.option("--rejected", "decision", flag_value="rejected", help="Only rejected candidates.")
@click.option("--accepted", "decision", flag_value="accepted", help="Only accepted candidates.")
@click.option("--run", "run_id", metavar="RUN", help="Only this run.")
@click.option(
    "-n",
    "--max-count",
    "limit",
    # SQLite reads LIMIT -1 as "no limit"; past its largest integer the query fails.
    type=click.IntRange(min=1, max=2**63 - 1),
    metavar="N",
    help="Show at most N entries.",
)
@click.option("-p", "--patch", is_flag=True, help="Show the skill diff of each candidate.")
@skill_option
@json_option
@table_options
@screen_options
def log(
    skill: str | None,
    decision: str | None,
    run_id: str | None,
    limit: int | None,
    patch: bool,
    as_json: bool,
    table_format: str | None,
) -> None:
    """Gate decisions, newest first, like 'git log' over the event log.

    Example: skillvc log --rejected -n 5 -p
    """
    from skillvc.review.history import LOG_KEYS, entry_patch, log_entries
    from skillvc.skill.skills import run_skill_path
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(skill=skill, any_skill=True)
    of_skill = ws.config.skill.path if skill is not None else None  # --skill filters

    def skill_path(store: Any, entry: Any) -> str:
        if not ws.config.many:
            return ws.skill_relpath
        return run_skill_path(store, str(entry.gate.run_id)) or "SKILL.md"  # its run's skill

    with ws.store() as store:
        entries = log_entries(
            store, decision=decision, run_id=run_id, limit=limit, skill_path=of_skill
        )
        rendered = [
            e.to_dict(patch=entry_patch(store, e, skill_path(store, e)) if patch else None)
            for e in entries
        ]
    none = "No gate decisions yet; run 'skillvc train' first."
    if echo_listing(rendered, as_json, table_format, LOG_KEYS, none):
        return
    click.echo("\n\n".join(format_log_entry(e) for e in rendered))


command = log
