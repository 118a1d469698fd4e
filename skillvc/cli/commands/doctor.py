"""``skillvc doctor``: check the config, credentials and reachability of the configured models.

A thin command over ``skillvc.review.doctor``: one line per check on stdout (or ``--json``), then
exit code 6 (a ``BackendError``) when any check failed, so scripts and CI can gate on it.
"""

from __future__ import annotations

import click

from skillvc.review.output import echo_json, json_option, skill_option


@click.command("doctor")
@skill_option
@json_option
@click.option(
    "--no-agent-prompt",
    "no_agent_prompt",
    is_flag=True,
    help="Do not send an agent CLI (claude-code, codex) its one tiny test prompt (a paid "
    "request on a paid key); only its --version is checked.",
)
def command(skill: str | None, as_json: bool, no_agent_prompt: bool) -> None:
    """Check skillvc.toml, model credentials and reachability (one tiny call per model).

    Nothing is recorded or cached; keys are never printed. Exits 6 when a check fails.
    With several skills, every one is checked unless --skill names one.
    Example: skillvc doctor
    """
    from skillvc.review.doctor import diagnose

    def waiting(line: str) -> None:  # a slow server's wait, on stderr (never in --json)
        click.echo(line, err=True)

    report = diagnose(".", skill, agent_prompt=not no_agent_prompt, waiting=waiting)
    if as_json:
        echo_json(report.to_dict())
    else:
        for check in report.checks:
            click.echo(check.line())
    if not report.ok:
        raise report.error()
    if not as_json:
        click.echo(f"All {len(report.checks)} checks passed.")
