"""``skillvc report``: a pull-request description for a training run."""

from __future__ import annotations

import click

from skillvc.output import echo_json


@click.command("report")
@click.option("--run", "run_id", metavar="RUN", help="The run to report (default: the latest).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["markdown", "json"]),
    default="markdown",
    show_default=True,
)
def command(run_id: str | None, fmt: str) -> None:
    """Scores, cost, steps, accepted diffs and rejected edits of a run, for a pull request.

    Example: skillvc report > pr-body.md
    """
    from skillvc.report import render_markdown, run_report
    from skillvc.workspace import open_workspace

    ws = open_workspace()
    with ws.store() as store:
        report = run_report(store, run_id, ws.skill_relpath)
    if fmt == "json":
        echo_json(report)
    else:
        click.echo(render_markdown(report), nl=False)
