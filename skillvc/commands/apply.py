"""``skillvc apply``: record a human-written patch of the skill as edits and one commit."""

from __future__ import annotations

from typing import BinaryIO

import click


@click.command("apply")
@click.argument("patch", type=click.File("rb"))
@click.option(
    "-m",
    "--message",
    default="Apply a hand-written patch to the skill",
    show_default=True,
    help="The commit message.",
)
def command(patch: BinaryIO, message: str) -> None:
    """Apply PATCH (a unified diff of the skill, '-' for stdin) as recorded edits.

    Each hunk becomes an edit event (source "human") and the result one commit, under the same
    rules as training. The diff's paths (a/ and b/ stripped) must name the configured skill
    inside the repository; a hunk that does not match at its stated line (give or take 10
    lines), or that touches the frontmatter or a protected region, is refused and nothing is
    written.
    Example: git diff HEAD~1 -- SKILL.md | skillvc apply - -m "Tighten the refund rule"
    """
    from skillvc.patches import apply_patch
    from skillvc.workspace import open_workspace

    applied = apply_patch(open_workspace(), patch.read(), message)
    ids = ", ".join(str(i) for i in applied.event_ids)
    click.echo(
        f"Committed {applied.sha[:10]}: {len(applied.edits)} edit(s) recorded (events {ids})."
    )
