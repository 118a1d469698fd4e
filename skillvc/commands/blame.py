"""``skillvc blame``: each skill line with the commit, run, step and val gain behind it."""

from __future__ import annotations

import click

from skillvc.output import echo_json


@click.command("blame")
@click.argument("skill", required=False)
@click.option("--rev", default="HEAD", show_default=True, help="Blame the skill at this revision.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def command(skill: str | None, rev: str, as_json: bool) -> None:
    """Annotate each line of the skill with the commit that introduced it.

    Training commits show their run, step and val gain; human lines say so.
    Example: skillvc blame skills/support/SKILL.md
    """
    from skillvc.report import blame
    from skillvc.workspace import open_workspace

    ws = open_workspace()
    path = skill or ws.skill_relpath
    store = ws.store() if ws.db_path.exists() else None
    try:
        lines = blame(store, ws.repo, path, rev)
    finally:
        if store is not None:
            store.close()
    if as_json:
        echo_json([line.to_dict() for line in lines])
        return
    for line in lines:
        d = line.to_dict()
        if line.human:
            who = f"human ({line.author})"
        elif line.kind == "slow_update":
            who = f"{line.run} slow update"
        else:
            gain = "" if d["val_gain"] is None else f" {d['val_gain']:+.3f}"
            who = f"{line.run} step {line.step}{gain}"
        click.echo(f"{line.commit[:8]} {who:<32.32} {line.number:>4}| {line.text}")
