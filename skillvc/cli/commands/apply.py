"""``skillvc apply``: record a human-written patch of the skill as edits and one commit."""

from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO

import click

from skillvc.review.output import skill_option

if TYPE_CHECKING:
    from skillvc.core.config import Config


@click.command("apply")
@click.argument("patch", type=click.File("rb"))
@click.option(
    "-m",
    "--message",
    default="Apply a hand-written patch to the skill",
    show_default=True,
    help="The commit message.",
)
@click.option("--force", is_flag=True, help="Commit the patch even when it scores worse on val.")
@click.option(
    "--no-gate", "no_gate", is_flag=True, help="Do not score it on val (offline; no model call)."
)
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@skill_option
def command(
    patch: BinaryIO, message: str, force: bool, no_gate: bool, quiet: bool, skill: str | None
) -> None:
    """Apply PATCH (a unified diff of the skill, '-' for stdin) as recorded edits.

    Each hunk becomes an edit event (source "human") and the result one commit, under the same
    rules as training. The diff's paths (a/ and b/ stripped) must name the configured skill
    inside the repository; a hunk that does not match at its stated line (give or take 10
    lines), or that touches the frontmatter or a protected region, is refused and nothing is
    written. For a skill package the diff may change several of its files (one commit) and
    add a file that a link from SKILL.md leads to; it never deletes or renames one.
    Like a training step, it is gated: HEAD and the patched skill are scored on val and a
    lower score is refused (exit 7) unless --force; --no-gate skips the scoring.
    Example: git diff HEAD~1 -- SKILL.md | skillvc apply - -m "Tighten the refund rule"
    """
    from skillvc.core.progress import Progress
    from skillvc.review.evaluation import ApplyGate, gate_text
    from skillvc.workspace.apply import apply_patch
    from skillvc.workspace.workspace import open_workspace

    data = patch.read()
    if skill is None:  # many skills: the patch's own +++ path names the skill it edits
        ws = open_workspace(any_skill=True)
        if ws.config.many:
            skill = _skill_of(ws.config, _patched_path(data))
    ws = open_workspace(skill=skill)
    gate = None if no_gate else ApplyGate(ws, force=force, progress=Progress.to_stderr(quiet))
    applied = apply_patch(ws, data, message, check=gate)
    if gate is not None and gate.comparison is not None:
        click.echo(f"Val: {gate_text(gate.comparison)}.")
        if gate.regressed:
            click.echo("A drop, committed because of --force.")
    ids = ", ".join(str(i) for i in applied.event_ids)
    into = f" to {', '.join(applied.files)}" if applied.files else ""  # a skill package's
    click.echo(
        f"Committed {applied.sha[:10]}: {len(applied.edits)} edit(s){into} recorded (events {ids})."
    )


def _skill_of(config: Config, path: str | None) -> str | None:
    """The skill a patched path belongs to: a skill package whose directory holds it (by
    name), else the path as given (a skill file, or nothing select_skill will find)."""
    if path is None:
        return None
    for name, skill in zip(config.skill_names, config.all_skills(), strict=True):
        directory = skill.package_dir
        if directory is not None and (not directory or path.startswith(f"{directory}/")):
            return name
    return path


def _patched_path(data: bytes) -> str | None:
    """The path of the first ``+++`` line of a unified diff (``b/`` stripped), or None."""
    import re

    found = re.search(rb"^\+\+\+ (?:b/)?([^\t\r\n]+)", data, re.MULTILINE)
    return found.group(1).decode("utf-8", "replace").strip() if found else None
