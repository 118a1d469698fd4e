"""``skillvc calls``: recent model calls with their prompts and answers, like ``llm logs``."""

from __future__ import annotations

import click

from skillvc.review.output import echo_json, json_option


@click.command("calls")
@click.option(
    "-n",
    "--count",
    "limit",
    default=3,
    show_default=True,
    type=click.IntRange(min=0, max=2**63 - 1),
    help="Show the N most recent calls (0: all).",
)
@click.option("-q", "--query", metavar="WORD", help="Only calls whose prompt or answer has WORD.")
@click.option(
    "--role",
    type=click.Choice(["target", "optimizer", "judge"]),
    help="Only calls made in this role.",
)
@click.option("--run", "run_id", metavar="RUN", help="Only the calls this run made.")
@json_option
def command(
    limit: int, query: str | None, role: str | None, run_id: str | None, as_json: bool
) -> None:
    """Recent model calls, newest first: messages, answer, tokens and cost.

    Every call training, eval and check made is in the event log; a call answered from the
    log is listed once, under the run that made it. 'skillvc show KEY' shows one call.
    Example: skillvc calls -n 5 -q refund --role target
    """
    from skillvc.review.history import recent_calls
    from skillvc.review.output import format_call
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(any_skill=True)
    with ws.store() as store:
        calls = recent_calls(store, limit=limit or None, query=query, role=role, run=run_id)
    if as_json:
        echo_json(calls)
        return
    if not calls:
        click.echo("No model calls match.", err=True)
        return
    for i, call in enumerate(calls):
        event = {"id": call["id"], "created_at": call["created_at"], "run_id": call["run"]}
        click.echo(("\n" if i else "") + format_call(event | {"step": call["step"]}, call))
