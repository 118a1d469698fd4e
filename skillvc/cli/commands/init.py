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
@click.option(
    "--from-skillopt",
    "skillopt_config",
    metavar="CONFIG.yaml",
    type=click.Path(dir_okay=False),
    help="Write skillvc.toml from a SkillOpt config (its _base_ chain and KEY=VALUE overrides).",
)
@click.argument("args", nargs=-1, metavar="[DIRECTORY] [KEY=VALUE]...")
def init(
    args: tuple[str, ...], with_hooks: bool, skillopt_config: str | None, **options: Any
) -> None:
    """Set up skillvc in a skills repository (git init if needed). Safe to re-run.

    With --from-skillopt, skillvc.toml is translated from a SkillOpt config, followed by
    SkillOpt-style overrides (train.batch_size=20); every setting without an equivalent is
    listed in the file and on stderr.

    Example: skillvc init --skill skills/support/SKILL.md --train evals/train.jsonl

    Example: skillvc init --from-skillopt configs/searchqa/default.yaml train.num_epochs=2
    """
    from skillvc.workspace.workspace import init_workspace

    overrides = [a for a in args if "=" in a]
    places = [a for a in args if "=" not in a]
    if len(places) > 1:
        raise click.UsageError(f"One DIRECTORY at most (got {', '.join(places)}).")
    if overrides and not skillopt_config:
        raise click.UsageError(
            f"KEY=VALUE overrides ({overrides[0]}) go with --from-skillopt CONFIG.yaml."
        )
    directory = places[0] if places else "."
    if skillopt_config:
        _from_skillopt(directory, skillopt_config, overrides, options)
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
        if not (skillopt_config and note.endswith("already exists; left as it is.")):
            click.echo(note)
    if with_hooks:
        from skillvc.integrations.hooks import install_hooks

        for change in install_hooks(result.root):
            click.echo(change.message)


def _from_skillopt(
    directory: str, source: str, overrides: list[str], options: dict[str, Any]
) -> None:
    """Write skillvc.toml translated from a SkillOpt config, and say what did not translate."""
    from pathlib import Path

    from skillvc.integrations.skillopt import config as skillopt

    root = Path(directory).resolve()
    root.mkdir(parents=True, exist_ok=True)
    translation = skillopt.translate(
        skillopt.load(source, overrides), skill=options.get("skill"), source=source
    )
    translation.notes.extend(skillopt.relative_paths(translation, root))
    skillopt.write(root, translation)
    options["skill"] = None  # the file names it
    click.echo(f"Wrote skillvc.toml from the SkillOpt config {source}; review it, then commit it.")
    lines = translation.untranslated_lines()
    click.echo(
        f"{len(translation.untranslated)} SkillOpt settings have no equivalent in skillvc "
        "(listed at the end of skillvc.toml too):",
        err=True,
    )
    for line in lines:
        click.echo(f"  {line}", err=True)
    if translation.notes:
        click.echo("Before training:", err=True)
    for note in translation.notes:
        click.echo(f"  - {note}", err=True)


command = init
