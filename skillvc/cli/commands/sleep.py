"""``skillvc sleep``: one night of learning from your sessions, on its own branch."""

from __future__ import annotations

import click

from skillvc.review.output import echo_json, fmt_score, json_option, skill_option, source_option


@click.command("sleep")
@source_option
@click.option(
    "--budget-usd",
    type=click.FloatRange(0, min_open=True),
    help="Stop training past this cost; required for paid models.",
)
@click.option("--yes", is_flag=True, help="Train on newly mined items without review.")
@click.option("--date", metavar="YYYY-MM-DD", help="The night's date in the branch name [today].")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@skill_option
@json_option
@click.argument("dirs", nargs=-1, type=click.Path(file_okay=False))
def command(
    skill: str | None,
    source: str | None,
    budget_usd: float | None,
    yes: bool,
    date: str | None,
    quiet: bool,
    as_json: bool,
    dirs: tuple[str, ...],
) -> None:
    """Harvest new sessions, train on the reviewed tasks on skillvc/sleep/<date>, report.

    Your branch and working tree are not touched; open a pull request from the new branch.
    Example: skillvc sleep --budget-usd 2
    """
    from skillvc.sleep.harvest import counted
    from skillvc.sleep.nightly import sleep
    from skillvc.workspace.workspace import open_workspace

    progress = None if quiet or as_json else (lambda line: click.echo(line, err=True))
    result = sleep(
        open_workspace(skill=skill),
        source=source,
        dirs=dirs,
        budget_usd=budget_usd,
        yes=yes,
        date=date,
        progress=progress,
    )
    if as_json:
        echo_json(result.to_dict())
        return
    h = result.harvest
    click.echo(
        f"{h.harvest}: {counted(h.sessions_new, 'new session')}, "
        f"{counted(len(h.kinds), 'recurring kind')}, "
        f"{counted(h.one_offs, 'one-off prompt')} left out, {h.unreviewed} items await review."
    )
    if result.summary:
        s = result.summary
        click.echo(
            f"run {result.run} on branch {result.branch}: {s['accepted']} accepted, "
            f"{s['rejected']} rejected; val {fmt_score(s['baseline_val'])} -> "
            f"{fmt_score(s['best_val'])}."
        )
    for warning in result.warnings:
        click.echo(f"Warning: {warning}")
    click.echo(f"Report: {result.report}")
    if result.branch:
        click.echo(f"Review it: git log -p {result.branch}; open a pull request from it.")
