"""``skillvc diff``: the skill's diff between two revisions, with their scores when known."""

from __future__ import annotations

from collections.abc import Callable

import click

from skillvc.review.output import color_diff, echo_json, fmt_score, skill_option
from skillvc.terminal.pager import screen_options


@click.command("diff")
@click.argument("rev_a", metavar="[A]", default="HEAD")
@click.argument("rev_b", metavar="[B]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@skill_option
@screen_options
def command(rev_a: str, rev_b: str | None, as_json: bool, skill: str | None) -> None:
    """Diff of the skill between A (default: HEAD) and B (default: the working tree).

    A and B are git revisions or checkpoints such as skillvc/<run>/best; known scores are
    shown. With no argument: the uncommitted change to the skill. A skill package's diff
    covers every file of the package that changed.
    Example: skillvc diff skillvc/run-1a2b3c4d/epoch-1 skillvc/run-1a2b3c4d/best
    """
    from skillvc.review.report import known_scores
    from skillvc.skill.edits import unified_diff
    from skillvc.skill.skilldoc import SkillDocument
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(skill=skill)
    path = ws.skill_relpath
    files: list[str] | None = None  # a package's changed files (single-file output as before)
    if ws.config.package_dir is not None:
        from skillvc.packages.diff import package_diff

        if rev_b is None:
            ws.require_skill()
        diff, old, new = package_diff(ws.config, ws.repo, rev_a, rev_b)
        path, patch, files = ws.config.package_dir, diff.patch, list(diff.files)
        # A package version's identity (what scores are recorded against) is its bundle.
        before, after = _identity(old.bundle), _identity(new.bundle)
    else:
        # Followed like the working-tree file: a symlinked skill diffs by its text, not the link.
        raw_a = ws.repo.read_file_following(path, rev_a)
        raw_b = ws.read_skill() if rev_b is None else ws.repo.read_file_following(path, rev_b)
        patch = unified_diff(SkillDocument.parse(raw_a), SkillDocument.parse(raw_b), path=path)
        before, after = raw_a.decode("utf-8"), raw_b.decode("utf-8")
    scores: dict[str, dict[str, float]] = {"a": {}, "b": {}}
    if ws.db_path.exists():
        with ws.store() as store:
            scores = {
                "a": known_scores(store, before) if before is not None else {},
                "b": known_scores(store, after) if after is not None else {},
            }
    if as_json:
        data = {"a": rev_a, "b": rev_b or "worktree", "path": path, "scores": scores}
        echo_json({**data, "patch": patch, **({"files": files} if files is not None else {})})
        return
    for label, rev in (("a", rev_a), ("b", rev_b)):
        known = ", ".join(f"{k} {fmt_score(v)}" for k, v in sorted(scores[label].items()))
        how = "skillvc eval" + (f" {rev}" if rev else "")  # no REV: the working tree
        click.echo(
            f"{label.upper()}: {rev or 'working tree'}  ({known or 'no score recorded; ' + how})"
        )
    click.echo(color_diff(patch) if patch else "(no change to the skill)", nl=not patch)


def _identity(bundle: Callable[[], str]) -> str | None:
    """A package's bundle, or None when a file is not UTF-8 (no version of it was scored)."""
    try:
        return bundle()
    except UnicodeDecodeError:
        return None
