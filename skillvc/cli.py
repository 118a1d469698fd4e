"""The ``skillvc`` command line: thin click commands over the library.

Each command parses options, makes one library call and renders the result. Errors from the
``SkillvcError`` family become one sentence plus a hint and a stable exit code; anything else
is a crash (exit 70) whose traceback ``SKILLVC_RAISE_ERRORS=1`` shows.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from skillvc import __version__
from skillvc.errors import INTERNAL_ERROR_EXIT_CODE, SkillvcError, redact, should_reraise
from skillvc.output import echo_json, format_log_entry, json_option


class SkillvcGroup(click.Group):
    """Turns library errors into one clear sentence, a hint and a stable exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SkillvcError as exc:
            if should_reraise():
                raise
            click.echo(f"Error: {redact(exc.message)}", err=True)
            if exc.hint:
                click.echo(f"Hint: {exc.hint}", err=True)
            ctx.exit(exc.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("Interrupted; run 'skillvc train' again to resume.", err=True)
            ctx.exit(130)
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            if should_reraise():
                raise
            click.echo(
                f"skillvc crashed: {type(exc).__name__}: {redact(str(exc))}\n"
                "Set SKILLVC_RAISE_ERRORS=1 to see the traceback, and please report it.",
                err=True,
            )
            ctx.exit(INTERNAL_ERROR_EXIT_CODE)


@click.group(cls=SkillvcGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="skillvc")
def cli() -> None:
    """Train LLM agent skills like neural networks, with every step under version control.

    \b
    skillvc init            set up a skills repo (skillvc.toml, .skillvc/)
    skillvc train           train the skill; accepted edits become commits
    skillvc log --rejected  what was tried and refused
    skillvc demo            the whole loop offline on a bundled example
    """


@cli.command()
@click.option(
    "--skill", "skill", metavar="PATH", help="The skill file to train (default: the one SKILL.md)."
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
@click.argument("directory", default=".", type=click.Path(file_okay=False))
def init(directory: str, **options: Any) -> None:
    """Set up skillvc in a skills repository (git init if needed). Safe to re-run.

    Example: skillvc init --skill skills/support/SKILL.md --train evals/train.jsonl
    """
    from skillvc.workspace import init_workspace

    result = init_workspace(directory, **options)
    if result.git_initialised:
        click.echo(f"Initialised a git repository in {result.root}.")
    if result.config_written:
        click.echo(f"Wrote skillvc.toml (training {result.skill_path}); commit it.")
    if result.state_created:
        click.echo("Created .skillvc/ (the event log, local state).")
    if result.gitignore_updated:
        click.echo("Added /.skillvc/ to .gitignore.")
    for note in result.notes:
        click.echo(note)


@cli.command()
@click.option("--rejected", "decision", flag_value="rejected", help="Only rejected candidates.")
@click.option("--accepted", "decision", flag_value="accepted", help="Only accepted candidates.")
@click.option("--run", "run_id", metavar="RUN", help="Only this run.")
@click.option("-n", "--max-count", "limit", type=int, metavar="N", help="Show at most N entries.")
@click.option("-p", "--patch", is_flag=True, help="Show the skill diff of each candidate.")
@json_option
def log(
    decision: str | None, run_id: str | None, limit: int | None, patch: bool, as_json: bool
) -> None:
    """Gate decisions, newest first, like 'git log' over the event log.

    Example: skillvc log --rejected -n 5 -p
    """
    from skillvc.history import entry_patch, log_entries
    from skillvc.workspace import open_workspace

    ws = open_workspace()
    with ws.store() as store:
        entries = log_entries(store, decision=decision, run_id=run_id, limit=limit)
        rendered = [
            e.to_dict(patch=entry_patch(store, e, ws.skill_relpath) if patch else None)
            for e in entries
        ]
    if as_json:
        echo_json(rendered)
        return
    if not rendered:
        click.echo("No gate decisions yet; run 'skillvc train' first.", err=True)
    click.echo("\n\n".join(format_log_entry(e) for e in rendered))


@cli.command()
@click.argument("ident", metavar="ID")
@json_option
def show(ident: str, as_json: bool) -> None:
    """One event, edit, commit or run with its full evidence, like 'git show'.

    ID is an event id, an edit id, a commit sha (prefixes work) or a run id.
    Example: skillvc show 42
    """
    from skillvc.history import show as show_event
    from skillvc.workspace import open_workspace

    ws = open_workspace()
    with ws.store() as store:
        data = show_event(store, ident)
    if as_json:
        echo_json(data)
        return
    if "entry" in data:
        click.echo(format_log_entry(data["entry"]))
        return
    event = data["event"]
    click.echo(
        f"event {event['id']}  {event['type']}  run {event['run_id']}  {event['created_at']}"
    )
    echo_json(event["payload"])
    for name in ("prompt", "response"):
        if name in data:
            click.echo(f"--- {name} ---\n{data[name]}")
    if data.get("gates"):
        click.echo(f"in candidates (gate events): {', '.join(map(str, data['gates']))}")


def main() -> None:
    cli(prog_name="skillvc")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
