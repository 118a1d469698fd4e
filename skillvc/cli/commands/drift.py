"""``skillvc drift --target NEW [--rev REV] [--split val] [--json]``.

Scores the committed skill (``--rev``, default HEAD) with a new model version and pairs it
with the current ``[target]``'s scores of the same skill (answered from the event log when
they were recorded before, e.g. by training or ``skillvc eval``). NEW is a model string (the
rest of ``[target]`` is kept) or the name of a ``[targets.<name>]`` table. The verdict is the
one-sided exact sign test of ``skillvc check --matrix`` at ``[train] gate_targets_alpha``.

JSON: ``{"rev", "current", "new", "recorded", "retrain", "advice", "split", "n", "a_mean",
"b_mean", "diff", "better", "worse", "p", "alpha", "regression", "down", "up"}``.

Exit codes: 0 no significant drop, 7 retrain (the new model scores significantly worse),
5 a --target that is neither a table nor a model string, 5/6 as ``skillvc eval``.
"""

from __future__ import annotations

import click

from skillvc.review.output import echo_json, json_option, skill_option, split_option


@click.command("drift")
@click.option(
    "--target",
    "new",
    required=True,
    metavar="NEW",
    help="The new model (e.g. openai:gpt-5.5-mini) or a [targets.<name>] table.",
)
@click.option("--rev", default="HEAD", show_default=True, help="The skill version to score.")
@split_option("score on")
@click.option("--workers", type=click.IntRange(min=1), help="Model calls in flight at once.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@skill_option
@json_option
def command(
    skill: str | None,
    new: str,
    rev: str,
    split: str,
    workers: int | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Tell whether the committed skill needs retraining for a new model version (exit 7: yes).

    Example: skillvc drift --target openai:gpt-5.5-mini
    """
    from skillvc.core.errors import RegressionFound
    from skillvc.core.progress import Progress
    from skillvc.matrix.scores import drift
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(skill=skill)
    result = drift(
        ws,
        new,
        split,
        rev=rev,
        alpha=ws.config.train.gate_targets_alpha,
        workers=workers,
        progress=Progress.to_stderr(quiet),
    )
    if as_json:
        echo_json(result.to_dict())
    else:
        source = "from the event log" if result.recorded else "evaluated now"
        click.echo(f"current target {result.change.comparison.a.model}: scores {source}")
        click.echo(result.change.sentence())
        if not result.retrain:
            click.echo(result.advice())
    if result.retrain:
        raise RegressionFound(
            result.advice(),
            hint="Retrain with the new model: set [target] model and run skillvc train.",
        )
