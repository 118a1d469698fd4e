"""``skillvc demo``: the whole loop offline on a bundled example, and what to try next."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from skillvc.cli.runlines import progress_for, summary_lines
from skillvc.review.output import (
    format_log_entry,
)
from skillvc.terminal.fit import fits_terminal, terminal_width


@click.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=None,
    help="Where to create the demo repo [a new temporary directory].",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option(
    "--package",
    is_flag=True,
    help="Train a skill package (SKILL.md and reference files) with sim:support-package.",
)
@click.option(
    "--tools",
    is_flag=True,
    help="Train a tool-using skill: sim:inventory calls the demo's tools/inventory.py.",
)
@fits_terminal
def demo(directory: str | None, quiet: bool, package: bool, tools: bool) -> None:
    """Train a bundled example skill offline with the simulator, then show the result.

    Needs no network and no API key. With --package the skill is a directory whose SKILL.md
    links reference files, and training edits (and creates) them. With --tools the target acts:
    it calls the demo's Python tools through the tool loop, and training finds the tool-use rules.
    Example: skillvc demo --dir /tmp/acme
    """
    import tempfile

    from skillvc.review.history import log_entries
    from skillvc.review.output import format_runs
    from skillvc.review.runs import list_runs
    from skillvc.training.demo import PACKAGE_INTRO, TOOLS_INTRO, run_demo
    from skillvc.workspace.workspace import open_workspace

    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="skillvc-demo-"))
    me = _own_command()
    if not quiet:  # a progress line like the others -q silences (stdout says where: "cd ...")
        click.echo(f"Creating the demo skills repo in {root}", err=True)
    if package and tools:
        raise click.UsageError("Choose one of --package and --tools.")
    if package:
        click.echo(PACKAGE_INTRO)
    if tools:
        click.echo(TOOLS_INTRO)
    summary = run_demo(root, progress=progress_for(quiet), package=package, tools=tools)
    ws = open_workspace(root)
    click.echo("\n".join(summary_lines(summary)))
    with ws.store() as store:
        click.echo("\n== Runs (skillvc runs) ==")
        click.echo(format_runs(list_runs(store), terminal_width()))
    click.echo("\n== Accepted edits are commits (git log --oneline) ==")
    click.echo(ws.repo.git_repo.git.log("--oneline", "--decorate=short"))
    if package:
        click.echo("\n== The package files each accepted commit changes ==")
        click.echo("\n".join(_package_lines(ws, summary.run_id)))
    with ws.store() as store:
        rejected = [e.to_dict() for e in log_entries(store, decision="rejected", limit=3)]
    click.echo("\n== Rejected candidates (skillvc log --rejected -n 3) ==")
    click.echo("\n\n".join(format_log_entry(e) for e in rejected) or "(none)")
    steps = [
        (f"cd {root}", ""),
        (f"{me} runs", "the runs table"),
        (f"{me} log --rejected -p", "what was tried and refused, with diffs"),
        ("git log -p skills/", "accepted edits with their evidence"),
        *([(f"{me} validate", "every link in the package resolves")] if package else []),
        (f"{me} report", "the run as a pull-request description"),
        (f"{me} train --new --no-buffer", "an ablation: watch rejected edits repeat"),
    ]
    width = max(len(cmd) for cmd, _ in steps)
    click.echo("\nTry next:")
    for cmd, why in steps:
        click.echo(f"  {cmd:<{width}}  # {why}" if why else f"  {cmd}")
    click.echo("\n".join(["", *OWN_SKILL]))  # for a skillvc on PATH: their own install


# How to go from the demo to one's own skill: the demo's last words.
OWN_SKILL = (
    "Start on your own skill (in your skills repository):",
    "  1. Task files: JSONL, one example a line, for train, val and test, e.g.",
    '       {"id": "t1", "input": "the task", "target": "the expected answer"}',
    "  2. skillvc init --skill skills/NAME/SKILL.md --train evals/train.jsonl \\",
    "       --val evals/val.jsonl --test evals/test.jsonl \\",
    "       --target openai:gpt-5.4-mini --optimizer anthropic:claude-sonnet-4-5",
    "     (models: openai:..., anthropic:..., or an OpenAI-compatible server through",
    "     OPENAI_BASE_URL; keys come from OPENAI_API_KEY and ANTHROPIC_API_KEY)",
    "  3. skillvc doctor    # checks the config, task files, keys and that the models answer",
    "  4. skillvc train     # then review: git log -p, skillvc log --rejected -p",
    "What the words mean: skillvc help terms",
)


def _package_lines(ws: Any, run_id: str) -> list[str]:
    """Each accepted commit of the package demo's run with the files it changes, then the
    reference files training changed and those it created (and whether SKILL.md links them)."""
    from skillvc.training.demo import package_changes

    changes = package_changes(ws.repo, run_id, ws.config.package_dir or "")
    lines: list[str] = []
    for commit in changes.commits:
        lines.append(f"{commit.sha[:7]} {commit.subject}")
        lines.extend(f"    {status}  {path}" for status, path in commit.files)
    changed = ", ".join(changes.changed) or "none"
    lines.append(f"Reference files changed by accepted commits: {changed}")
    for name, linked in changes.created:
        how = "linked from SKILL.md" if linked else "NOT linked from SKILL.md"
        lines.append(f"Created by training: {name}, {how}")
    return lines


def _own_command() -> str:
    """How to run this skillvc again from another directory: "skillvc" when PATH finds this
    very script, else its absolute path (e.g. a virtualenv that is not activated)."""
    import shutil

    script = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    found = shutil.which("skillvc")
    if script is None or not script.exists() or (found and Path(found).resolve() == script):
        return "skillvc"
    return str(script) if script.name == "skillvc" else "skillvc"


command = demo
