"""``skillvc diff``: the skill's diff between two revisions, with their scores when known."""

from __future__ import annotations

import click

from skillvc.output import echo_json, fmt_score, skill_option


@click.command("diff")
@click.argument("rev_a", metavar="[A]", default="HEAD")
@click.argument("rev_b", metavar="[B]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@skill_option
def command(rev_a: str, rev_b: str | None, as_json: bool, skill: str | None) -> None:
    """Diff of the skill between A (default: HEAD) and B (default: the working tree).

    A and B are git revisions or checkpoints such as skillvc/<run>/best; known scores are
    shown. With no argument: the uncommitted change to the skill.
    Example: skillvc diff skillvc/run-1a2b3c4d/epoch-1 skillvc/run-1a2b3c4d/best
    """
    from skillvc.edits import unified_diff
    from skillvc.report import known_scores
    from skillvc.skilldoc import SkillDocument
    from skillvc.workspace import open_workspace

    ws = open_workspace(skill=skill)
    path = ws.skill_relpath
    # Followed like the working-tree file: a symlinked skill diffs by its text, not the link.
    before = ws.repo.read_file_following(path, rev_a)
    after = (
        ws.require_skill().read_bytes()
        if rev_b is None
        else ws.repo.read_file_following(path, rev_b)
    )
    patch = unified_diff(SkillDocument.parse(before), SkillDocument.parse(after), path=path)
    scores: dict[str, dict[str, float]] = {"a": {}, "b": {}}
    if ws.db_path.exists():
        with ws.store() as store:
            scores = {
                "a": known_scores(store, before.decode("utf-8")),
                "b": known_scores(store, after.decode("utf-8")),
            }
    if as_json:
        echo_json(
            {"a": rev_a, "b": rev_b or "worktree", "path": path, "scores": scores, "patch": patch}
        )
        return
    for label, rev in (("a", rev_a), ("b", rev_b)):
        known = ", ".join(f"{k} {fmt_score(v)}" for k, v in sorted(scores[label].items()))
        how = "skillvc eval" + (f" {rev}" if rev else "")  # no REV: the working tree
        click.echo(
            f"{label.upper()}: {rev or 'working tree'}  ({known or 'no score recorded; ' + how})"
        )
    click.echo(patch or "(no change to the skill)", nl=not patch)
