"""``skillvc import-skillopt``: a SkillOpt run directory imported as skillvc history."""

from __future__ import annotations

import click

from skillvc.review.output import skill_option


@click.command("import-skillopt")
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(file_okay=False))
@click.option(
    "--branch",
    metavar="NAME",
    help="The branch that gets the accepted steps' commits [skillvc/<run>].",
)
@skill_option
def import_skillopt(run_dir: str, branch: str | None, skill: str | None) -> None:
    """Import a finished or interrupted SkillOpt run (its out_root) as a skillvc run.

    Each accepted step becomes a commit on a branch of its own (the work tree is not
    touched), each rejected candidate a ref under refs/skillvc/rejected/, and its steps,
    gates and slow updates events that runs, log, show and report read. RUN_DIR is only
    read. Importing again adds only what is new.

    Example: skillvc import-skillopt ../SkillOpt/outputs/searchqa_run
    """
    from skillvc.integrations.skillopt.importer import import_run
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(skill=skill)
    result = import_run(ws, run_dir, branch=branch)
    for line in result.skipped:
        click.echo(f"skipped: {line}", err=True)
    if result.new_events == 0:
        click.echo(f"Run {result.run_id} was imported already; nothing new in {run_dir}.")
        return
    state = "finished" if result.finished else "unfinished in SkillOpt"
    click.echo(
        f"Imported {run_dir} as run {result.run_id} ({state}): {result.steps} steps, "
        f"{result.accepted} accepted (commits on branch {result.branch}), {result.rejected} "
        f"rejected (refs/skillvc/rejected/{result.run_id}/), {result.slow_updates} slow "
        f"update{'' if result.slow_updates == 1 else 's'}."
    )
    click.echo(f"See it with: skillvc runs; skillvc report --run {result.run_id}")


command = import_skillopt
