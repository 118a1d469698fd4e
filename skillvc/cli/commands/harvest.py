"""``skillvc harvest``: learn which tasks recur in your own agent sessions (opt-in per project)."""

from __future__ import annotations

from typing import Any

import click

from skillvc.review.output import echo_json, json_option, source_option


def _render_kinds(result: Any, items: bool) -> list[str]:
    from skillvc.sleep.harvest import counted

    lines = []
    for kind in result.kinds:
        reviewed = sum(1 for i in kind.items if i["reviewed"])
        lines.append(
            f"kind {kind.id}  {kind.support} sessions, {len(kind.items)} items "
            f"({reviewed} reviewed): {kind.name}"
        )
        if items:
            for rubric_line in (kind.rubric or "(no rubric yet)").splitlines():
                lines.append(f"  rubric: {rubric_line}")
            for i in kind.items:
                mark = "x" if i["reviewed"] else " "
                prompt = " ".join(i["input"].split())
                prompt = prompt if len(prompt) <= 70 else prompt[:69] + "…"
                meta = i["metadata"]
                signals = (
                    f"{counted(meta['corrections'], 'correction')}, "
                    f"{counted(meta['tool_errors'], 'tool error')}"
                )
                lines.append(f"  [{mark}] {i['id']} {i['split']:<5} {prompt}  ({signals})")
    return lines


@click.command("harvest")
@source_option
@click.option("--review", is_flag=True, help="List the mined kinds, items and rubrics.")
@click.option(
    "--approve",
    multiple=True,
    metavar="ID",
    help="With --review: mark a kind's (or one item's) items reviewed. Repeatable.",
)
@click.option(
    "--rubric",
    "rubrics",
    nargs=2,
    multiple=True,
    metavar="KIND TEXT",
    help="With --review: replace a kind's judge rubric.",
)
@click.option(
    "--yes",
    is_flag=True,
    help="Mark every mined item reviewed (and harvest a directory without [harvest]).",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@json_option
@click.argument("dirs", nargs=-1, type=click.Path(file_okay=False))
def command(
    source: str | None,
    review: bool,
    approve: tuple[str, ...],
    rubrics: tuple[tuple[str, str], ...],
    yes: bool,
    quiet: bool,
    as_json: bool,
    dirs: tuple[str, ...],
) -> None:
    """Mine recurring tasks from agent transcripts into a reviewed, redacted task set.

    Reads only the directories named (or [harvest] dirs in skillvc.toml), redacts secrets and
    home paths before storing anything, and writes only reviewed items to [harvest] tasks.
    Example: skillvc harvest --from claude-code ~/.claude/projects/-home-me-skills
    """
    from skillvc.sleep.harvest import counted, harvest
    from skillvc.sleep.harvest import review as review_kinds
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(any_skill=True)  # [harvest] is the project's, not one skill's
    if review or approve or rubrics:
        if dirs or source:
            raise click.UsageError("--review lists what was harvested; it takes no directory.")
        result = review_kinds(ws, approve=approve, approve_all=yes, rubrics=dict(rubrics))
    else:
        progress = None if quiet or as_json else (lambda line: click.echo(line, err=True))
        result = harvest(ws, source=source, dirs=dirs, yes=yes, progress=progress)
    if as_json:
        echo_json(result.to_dict())
        return
    if result.harvest is not None:
        click.echo(
            f"{result.harvest}: {counted(result.sessions_new, 'new session')} read "
            f"({result.sessions_seen} already harvested), "
            f"{counted(len(result.kinds), 'recurring kind')}, "
            f"{counted(result.one_offs, 'one-off prompt')} left out."
        )
        redacted = ", ".join(f"{k} {v}" for k, v in result.redactions.items())
        click.echo(f"Redacted: {redacted or 'nothing'}.")
    lines = _render_kinds(result, items=review or bool(approve) or bool(rubrics))
    if lines:
        click.echo("\n".join(lines))
    elif result.harvest is None:
        click.echo("Nothing harvested yet; run 'skillvc harvest --from ... DIR' first.")
    if result.task_file:
        click.echo(f"Wrote {result.items_written} reviewed items to {result.task_file}.")
    if result.unreviewed:
        click.echo(
            f"{result.unreviewed} items await review: skillvc harvest --review, then "
            "--approve KIND (or --yes)."
        )
