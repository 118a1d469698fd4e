"""``skillvc init``: set up a skills repository (skillvc.toml, .skillvc/, hooks)."""

from __future__ import annotations

from typing import Any

import click


@click.command()
@click.option(
    "--skill",
    "skill",
    metavar="PATH",
    help="The skill file to train (default: the one SKILL.md; with several, all of them).",
)
@click.option(
    "--target", "target_model", metavar="MODEL", help="Target model, e.g. openai:gpt-5.4-mini."
)
@click.option("--optimizer", "optimizer_model", metavar="MODEL", help="Optimizer model.")
@click.option("--train", "train_file", metavar="FILE", help="Train split task file.")
@click.option("--val", "val_file", metavar="FILE", help="Validation split task file (the gate).")
@click.option("--test", "test_file", metavar="FILE", help="Test split task file (reported only).")
@click.option("--scorer", default="exact", show_default=True, help="How answers are scored.")
@click.option("--seed", default=42, show_default=True, type=int, help="Training seed.")
@click.option("--hooks", "with_hooks", is_flag=True, help="Also install the pre-commit hook.")
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def init(directory: str, with_hooks: bool, **options: Any) -> None:
    """Set up skillvc in a skills repository (git init if needed). Safe to re-run.

    Example: skillvc init --skill skills/support/SKILL.md --train evals/train.jsonl
    """
    from skillvc.workspace.workspace import init_workspace

    result = init_workspace(directory, **options)
    if result.git_initialised:
        click.echo(f"Initialised a git repository in {result.root}.")
    if result.config_written and result.skills:
        click.echo(
            f"Wrote skillvc.toml listing {len(result.skills)} skills ([skills.<name>] tables); "
            "commit it. Name one with --skill NAME when training:"
        )
    elif result.config_written:
        what = f"the skill package {result.skill_path}" if result.package else result.skill_path
        click.echo(f"Wrote skillvc.toml (training {what}); commit it.")
    if result.state_created:
        click.echo("Created .skillvc/ (the event log, local state).")
    if result.gitignore_updated:
        click.echo("Added /.skillvc/ to .gitignore.")
    for note in result.notes:
        click.echo(note)
    if with_hooks:
        from skillvc.integrations.hooks import install_hooks

        for change in install_hooks(result.root):
            click.echo(change.message)


command = init
