"""``skillvc train``: train the skill; accepted edits become commits."""

from __future__ import annotations

from typing import Any

import click

from skillvc.cli.runlines import fail_when_optimizer_unusable, progress_for, summary_lines
from skillvc.review.output import (
    echo_json,
    json_option,
    skill_option,
)
from skillvc.terminal.fit import fits_terminal

# Flags out of range are usage errors (exit 2) that name the flag, before any work starts.
POSITIVE = click.IntRange(min=1)


@click.command()
@click.option(
    "--new",
    is_flag=True,
    help="Start a new run even if one is unfinished (it is marked abandoned) or done.",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Resume the unfinished run with the settings it started with, whatever changed.",
)
@click.option("--epochs", type=POSITIVE, help="Passes over the train split [4].")
@click.option("--batch-size", type=POSITIVE, help="Train items per step [40].")
@click.option("--minibatch-size", type=POSITIVE, help="Trajectories per reflection call [8].")
@click.option("--lr", "learning_rate", type=POSITIVE, help="Edits per step at the start [4].")
@click.option("--min-lr", "min_learning_rate", type=POSITIVE, help="Edits per step at the end [2].")
@click.option(
    "--lr-schedule",
    type=click.Choice(["cosine", "linear", "constant"]),
    help="How the edit budget decays over the steps [cosine].",
)
@click.option(
    "--gate-metric",
    type=click.Choice(["hard", "soft", "mixed"]),
    help="Score the gate compares: 0/1, 0..1, or their mean [hard].",
)
@click.option("--samples", type=POSITIVE, help="Runs of each item per skill version, averaged [1].")
@click.option(
    "--gate-confidence",
    type=click.FloatRange(0, 1, max_open=True),
    help="Confidence a gain must reach, e.g. 0.9 [0.8 with attribution, else 0].",
)
@click.option(
    "--no-attribution",
    "attribution",
    flag_value=False,
    default=None,
    help="The paper's bundle gate: commit a passing candidate's edits as a whole.",
)
@click.option("--workers", type=POSITIVE, help="Model calls in flight at once [16].")
@click.option("--seed", type=int, help="Shuffling seed [42].")
@click.option("--branch", help="Train on this branch (created from HEAD if needed).")
@click.option(
    "--no-buffer",
    "buffer",
    flag_value=False,
    default=None,
    help="Do not show rejected edits to later reflections.",
)
@click.option(
    "--no-slow-update",
    "slow_update",
    flag_value=False,
    default=None,
    help="Skip the epoch-end slow update.",
)
@click.option(
    "--no-slow-update-gate",
    "slow_update_gate",
    flag_value=False,
    default=None,
    help="Apply slow updates without gating them (marked ungated).",
)
@click.option(
    "--no-meta-skill",
    "meta_skill",
    flag_value=False,
    default=None,
    help="Skip the optimizer-side meta skill.",
)
@click.option(
    "--no-early-stop",
    "early_stop",
    flag_value=False,
    default=None,
    help="Evaluate every val item in every gate.",
)
@click.option(
    "--no-speculate",
    "speculate",
    flag_value=False,
    default=None,
    help="Do not start the next rollouts while a candidate is gated.",
)
@click.option(
    "--budget-usd",
    type=click.FloatRange(0, min_open=True),
    help="Stop cleanly at a step boundary past this cost.",
)
@click.option(
    "--routing",
    is_flag=True,
    help="Train the library's descriptions for routing on the [routing] trigger set "
    "(docs/routing.md).",
)
@click.option(
    "--body",
    is_flag=True,
    default=None,
    help="With --routing: train the bodies too, a body epoch after each routing epoch.",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option("--trust-judge", is_flag=True, help="Let an uncalibrated or disagreeing judge gate.")
@skill_option
@json_option
@fits_terminal
def train(
    new: bool,
    resume: bool,
    budget_usd: float | None,
    quiet: bool,
    as_json: bool,
    skill: str | None,
    trust_judge: bool,
    routing: bool,
    body: bool | None,
    **train_options: Any,
) -> None:
    """Train the skill: accepted edits become commits; resumes an unfinished run.

    When the last run already finished at HEAD with the same settings, templates and task
    set, it says so and makes no call (--new trains again). When the settings changed since
    an unfinished run started, it says what changed: a run with no step done starts over by
    itself; otherwise pick --new or --resume. Budget, workers and speculation may change on
    a resume. Every option overrides the [train] key of the same name in skillvc.toml.
    Example: skillvc train --epochs 2 --lr-schedule constant
    """
    import dataclasses

    from skillvc.judge.trust import require_trusted_judge_here
    from skillvc.training.loop import UP_TO_DATE
    from skillvc.training.loop import train as run_training
    from skillvc.workspace.workspace import open_workspace

    if new and resume:
        raise click.UsageError("--new and --resume exclude each other; pick one.")
    if body and not routing:
        raise click.UsageError("--body goes with --routing (bodies alone: plain 'skillvc train').")
    if routing:
        train_routing_command(new, body, quiet, as_json)
        return
    ws = open_workspace(skill=skill)
    require_trusted_judge_here(ws.config, trust_judge)
    summary = run_training(
        ws,
        new=new,
        resume=resume,
        overrides={"train": train_options},
        budget_usd=budget_usd,
        progress=progress_for(quiet),  # stderr: never mixed into the JSON
    )
    if as_json:
        data = dataclasses.asdict(summary)
        data = {"run": data.pop("run_id"), **data}  # the same key as `skillvc runs --json`
        echo_json(data)
        fail_when_optimizer_unusable(summary)
        return
    if summary.status == UP_TO_DATE:
        at_head = summary.best_commit == ws.repo.head_sha()
        where = "at HEAD" if at_head else "with this skill as it is at HEAD (other files changed)"
        click.echo(
            f"Nothing to do: run {summary.run_id} already finished {where} "
            f"({(summary.best_commit or '')[:10]}) with this config, templates and task set; "
            "pass --new to train again."
        )
        return
    click.echo("\n".join(summary_lines(summary)))
    fail_when_optimizer_unusable(summary)
    named = f" --skill {ws.config.skill_name}" if ws.config.skill_name else ""  # many skills
    click.echo(
        f"Review it: git log -p (accepted edits), skillvc log --rejected -p{named} (refused "
        f"ones), skillvc report{named} (a pull-request description)."
    )


def train_routing_command(new: bool, body: bool | None, quiet: bool, as_json: bool) -> None:
    import dataclasses

    from skillvc.routing.train import summary_lines, train_routing
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(any_skill=True)
    summary = train_routing(ws, new=new, body=body, progress=progress_for(quiet))
    if as_json:
        data = dataclasses.asdict(summary)
        echo_json({"run": data.pop("run_id"), **data})
        return
    click.echo("\n".join(summary_lines(summary)))


command = train
