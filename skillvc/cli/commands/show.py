"""``skillvc show``: one event, commit, blob or model call, in full."""

from __future__ import annotations

from typing import Any

import click

from skillvc.core.errors import (
    SkillvcError,
)
from skillvc.review.output import (
    echo_json,
    format_log_entry,
    json_option,
)
from skillvc.terminal.fit import terminal_width
from skillvc.terminal.pager import screen_options


@click.command()
@click.argument("ident", metavar="ID")
@json_option
@screen_options
def show(ident: str, as_json: bool) -> None:
    """One event, edit, commit or run with its full evidence, like 'git show'.

    ID is an event id, RUN/SEQ (a commit's Skillvc-Event trailer), an edit id, a run id, a
    model call's key or a blob hash (or a unique prefix of 6+ characters of either), or a
    commit named any way git names it (sha prefix, HEAD~2, a skillvc/ tag): a training commit
    shows its gate, any other commit that touches a skill (apply, a hand edit) its message,
    recorded edits and diff. Model calls show their messages and response as text; rollouts
    their task, answer and score; every other event a text of its own.
    Example: skillvc show 42
    """
    from skillvc.review.history import show as show_event
    from skillvc.review.history import skill_commit
    from skillvc.review.output import format_blob, format_call, format_rollout, format_runs
    from skillvc.views.events import event_text, flip_lines
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(any_skill=True)

    def git_rev(rev: str) -> str | None:
        try:
            return ws.repo.resolve(rev)
        except SkillvcError:
            return None

    with ws.store() as store:
        skills = [
            s.package_dir if s.package_dir is not None else s.skill.path for s in skills_of(ws)
        ]

        def commit_view(sha: str) -> dict[str, Any] | None:
            return skill_commit(store, ws.repo, skills, sha)

        data = show_event(store, ident, resolve_rev=git_rev, commit_view=commit_view)
    if as_json:
        echo_json(data)
        return
    if "blob" in data:
        click.echo(format_blob(data["blob"], data["messages"]))
        return
    if "commit" in data:
        click.echo(format_commit(data["commit"]))
        return
    if "entry" in data:
        click.echo(format_log_entry(data["entry"]))
        flips = flip_lines(data["event"]["payload"], data.get("flips"))
        if flips:
            click.echo("\n".join(flips))
        return
    if data.get("run") is not None:
        click.echo(format_runs([data["run"]], terminal_width()))
        for entry in data["entries"]:
            click.echo("\n" + format_log_entry(entry))
        return
    event = data["event"]
    if "call" in data:
        click.echo(format_call(event, data["call"]))
        return
    if "rollout" in data:
        click.echo(format_rollout(event, data["rollout"]))
        return
    click.echo(event_text(event, data))
    if data.get("gates"):
        click.echo(f"  in candidates (gate events): {', '.join(map(str, data['gates']))}")


def skills_of(ws: Any) -> list[Any]:
    """Every skill of the workspace's config (one for a single-skill repository)."""
    return list(ws.config.all_skills())


def format_commit(commit: dict[str, Any]) -> str:
    """A commit that touches a skill but is no training step (``apply``, a hand edit)."""
    from skillvc.review.output import format_edit

    lines = [
        f"commit {commit['sha'][:10]}  {commit['authored_at']}",
        f"    {commit['subject']}",
        f"    skill files: {', '.join(commit['files'])}",
    ]
    if commit["edits"]:
        lines.append(
            f"    recorded edits (events {', '.join(str(e['id']) for e in commit['edits'])}):"
        )
        for e in commit["edits"]:
            lines.extend(format_edit(e["payload"].get("edit") or {}))
    else:
        lines.append("    a hand commit: no edit events (not made by skillvc)")
    if commit.get("gate"):  # skillvc apply's gate, as a training step's is shown
        lines.append(f"    gate (event {commit['gate']['id']}): {gate_words(commit['gate'])}")
    if commit["patch"]:
        lines.append("")
        lines.extend("    " + line for line in commit["patch"].rstrip("\n").splitlines())
    return "\n".join(lines)


def gate_words(gate: dict[str, Any]) -> str:
    """``val 0.833 -> 0.900 (hard, n=30), p = 0.31, within noise (alpha 0.1)``."""
    from skillvc.review.output import fmt_score
    from skillvc.training.significance import describe

    forced = "; committed with --force" if gate["decision"] == "forced" else ""
    return (
        f"val {fmt_score(gate['val_before'])} -> {fmt_score(gate['val_after'])} "
        f"({gate['metric']}, n={gate['n']}), {describe(gate['p_value'], gate['alpha'])} "
        f"(alpha {gate['alpha']:g}){forced}"
    )


command = show
