"""``skillvc judge calibrate|improve``: measure the judge against a person, and train its rubric.

``calibrate [--labels FILE] [--json]`` runs the ``judge`` scorer (model, rubric, threshold as
configured) on a person's labels and reports accuracy, Cohen's kappa and the false accept and
false reject rates with 95% Wilson intervals; it records a ``judge.calibrated`` event, which
is what lets the judge gate ``train`` and ``check`` (``[judge] min_accuracy``, ``min_kappa``).
Exit 0 when the judge reaches them, 7 when it does not (the report is printed first).

``improve [--labels FILE] [--json]`` trains the rubric file (``[tasks.scorer_options]
rubric_file``) to agree with the labels, with the ordinary training loop, and reports the
agreement before and after on the labels held back (``[judge] holdout``). See docs/judge.md.
"""

from __future__ import annotations

from typing import Any

import click

from skillvc.review.output import echo_json, json_option, skill_option


@click.group("judge")
def command() -> None:
    """Calibrate the LLM judge against a person's labels, and train its rubric."""


def _interval(data: dict[str, Any], key: str) -> str:
    value, interval = data.get(key), data.get(f"{key}_interval")
    if value is None:
        return "-"
    ci = f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else ""
    return f"{value:.3f}{ci}"


def agreement_lines(data: dict[str, Any]) -> list[str]:
    kappa = "-" if data["kappa"] is None else f"{data['kappa']:.3f}"
    return [
        f"accuracy       {_interval(data, 'accuracy')}  ({data['agree']}/{data['n']} agree)",
        f"Cohen's kappa  {kappa}",
        f"false accept   {_interval(data, 'false_accept')}  "
        f"(of {data['person_fails']} the person failed)",
        f"false reject   {_interval(data, 'false_reject')}  "
        f"(of {data['person_passes']} the person passed)",
    ]


@command.command("calibrate")
@click.option("--labels", metavar="FILE", help="JSONL of input, output, label (default: [judge]).")
@click.option("--workers", type=click.IntRange(min=1), help="Model calls in flight at once.")
@skill_option
@json_option
def calibrate_command(
    skill: str | None, labels: str | None, workers: int | None, as_json: bool
) -> None:
    """Measure how often the judge agrees with a person's labels (exit 7: below thresholds).

    Example: skillvc judge calibrate --labels evals/judge-labels.jsonl
    """
    from skillvc.core.errors import RegressionFound
    from skillvc.judge.calibrate import calibrate
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(skill=skill)
    result = calibrate(ws, labels, workers=workers)
    data = result.to_dict()
    if as_json:
        echo_json(data)
    else:
        click.echo(
            f"judge {result.model} (rubric {result.rubric[:10]}) vs {result.labels}, "
            f"n={result.agreement.n} (95% Wilson intervals):"
        )
        click.echo("\n".join(agreement_lines(data)))
        if result.trusted:
            click.echo("The judge may gate training and skillvc check.")
    if not result.trusted:
        t = result.thresholds
        raise RegressionFound(
            f"The judge's agreement is below [judge] min_accuracy {t['min_accuracy']:g} or "
            f"min_kappa {t['min_kappa']:g}, so it may not gate training or check.",
            hint="Improve the rubric with skillvc judge improve, or pass --trust-judge.",
        )


@command.command("improve")
@click.option("--labels", metavar="FILE", help="JSONL of input, output, label (default: [judge]).")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@skill_option
@json_option
def improve_command(skill: str | None, labels: str | None, quiet: bool, as_json: bool) -> None:
    """Train the rubric file to agree with the labels; accepted edits are commits.

    Example: skillvc judge improve --labels evals/judge-labels.jsonl
    """
    from skillvc.core.progress import Progress
    from skillvc.judge.improve import improve
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(skill=skill)
    result = improve(ws, labels, progress=Progress.to_stderr(quiet))
    data = result.to_dict()
    if as_json:
        echo_json(data)
        return
    click.echo(
        f"rubric run {result.summary.run_id}: {result.summary.accepted} edits accepted, "
        f"{result.summary.rejected} rejected"
    )
    click.echo(f"held-back labels (n={result.before.agreement.n}), before:")
    click.echo("\n".join("  " + line for line in agreement_lines(data["before"])))
    click.echo("after:")
    click.echo("\n".join("  " + line for line in agreement_lines(data["after"])))
