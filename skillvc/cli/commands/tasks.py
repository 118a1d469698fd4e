"""``skillvc tasks draft [-n N] [--from FILE ...] [--json]``: draft a skill's task set.

The optimizer drafts realistic inputs, edge cases and prompts where the skill should not apply,
each with acceptable answers or a rubric for the judge. Near-duplicates, drafts holding a secret
and drafts copying the skill's own text are dropped (counted); the rest are split into
train/val/test and written as pending rows, which never train or gate until a person approves
them (``skillvc review``). See docs/coldstart.md.

JSON (``--json``): ``{draft, model, prompt, call, items, dropped, spread, files, configured,
config_note}``; ``spread`` has ``n``, ``lengths`` {min, median, max}, ``kinds``, ``splits``
and ``sections`` {covered, missing}.
"""

from __future__ import annotations

import click

from skillvc.review.output import echo_json, json_option, skill_option


@click.group("tasks")
def command() -> None:
    """Draft a skill's task set (reviewed with skillvc review before it is used)."""


@command.command("draft")
@click.option(
    "-n",
    "n",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="How many items to ask for.",
)
@click.option(
    "--from",
    "sources",
    multiple=True,
    metavar="FILE",
    help="Examples or documents (in the repository) to draw the tasks from.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@skill_option
@json_option
def draft_command(
    skill: str | None, n: int, sources: tuple[str, ...], quiet: bool, as_json: bool
) -> None:
    """Draft task items for the skill with the optimizer model, written as pending.

    Example: skillvc tasks draft -n 30 --from docs/faq.md
    """
    from skillvc.coldstart.draft import draft
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(skill=skill)
    say = None if quiet else (lambda line: click.echo(line, err=True))
    result = draft(ws, n=n, sources=sources, progress=say)
    if as_json:
        echo_json(result.to_dict())
        return
    spread = result.spread
    lengths = spread["lengths"]
    dropped = ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in result.dropped.items())
    click.echo(
        f"Drafted {spread['n']} items for {ws.skill_relpath} with {result.model} "
        f"({result.draft}, prompt {result.prompt}); dropped: {dropped or 'none'}."
    )
    click.echo(
        "kinds: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in spread["kinds"].items())
    )
    click.echo("splits: " + ", ".join(f"{v} {k}" for k, v in spread["splits"].items()))
    click.echo(
        f"input length: {lengths['min']}-{lengths['max']} characters (median {lengths['median']})"
    )
    covered, missing = spread["sections"]["covered"], spread["sections"]["missing"]
    if covered or missing:
        click.echo(
            f"sections covered: {len(covered)} of {len(covered) + len(missing)}"
            + (f" (none for: {', '.join(missing)})" if missing else "")
        )
    for split, path in result.files.items():
        click.echo(f"wrote {split}: {path}")
    if result.configured:
        click.echo("Added to [tasks] in skillvc.toml: " + "; ".join(result.configured))
    if result.config_note:
        click.echo(result.config_note)
    if result.items:
        click.echo(
            "They are pending: nothing trains or gates on them until you approve them with "
            "'skillvc review'."
        )
