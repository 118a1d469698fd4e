"""``skillvc check --base BASE [REV] [--allow-drop X] [--split val] [--json]``.

The gate of ``skillvc train`` applied to any change, such as a human edit in a pull request:
evaluate the skill at BASE and at REV (default: the working-tree file; ``--head REV`` is the
older spelling), pair them item by item and fail when the change scores worse than its base
by more than the allowed drop.

Invariants:

* Needs nothing but the repository and ``skillvc.toml``: the event log is created when missing,
  so it runs in a fresh CI clone; model calls made before are answered from the log.
* The decision uses the paired difference over the items both versions scored: it fails
  (exit 7, ``RegressionFound``) when ``head - base < -allow_drop``; otherwise it exits 0.
* It never passes on missing evidence: when more than ``[train] max_failure_rate`` of either
  evaluation's target calls failed, or no item was scored by both, it stops with a backend
  error (exit 6) instead of a verdict.

JSON (``--json``), stable keys: ``{"verdict": "pass" | "regression", "allow_drop", "base"
(the BASE given), "head" (the REV given, or null for the working tree), "split", "message",
"comparison": <the object of ``skillvc eval --compare``: a is BASE, b is REV>}``. The JSON is
printed before a regression's exit 7, so CI can keep it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from skillvc.output import echo_json, fmt_score, json_option

if TYPE_CHECKING:
    from skillvc.evaluation import Comparison, EvalResult

EPS = 1e-9


@click.command("check")
@click.argument("rev", metavar="[REV]", required=False)
@click.option("--base", required=True, metavar="REV", help="The revision to compare against.")
# The older spelling of the positional REV (the pre-push hook writes it), kept working.
@click.option("--head", metavar="REV", help="Same as REV.")
@click.option(
    "--allow-drop",
    type=click.FloatRange(min=0.0),
    default=0.0,
    show_default=True,
    help="Tolerate a score drop up to this much (on the gate metric's 0..1 scale).",
)
@click.option(
    "--split",
    type=click.Choice(["val", "test", "train"]),
    default="val",
    show_default=True,
    help="The split to gate on.",
)
@click.option("--workers", type=click.IntRange(min=1), help="Model calls in flight at once.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@json_option
def command(
    rev: str | None,
    base: str,
    head: str | None,
    allow_drop: float,
    split: str,
    workers: int | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Fail (exit 7) when the skill at REV (default: the working tree) scores worse than at
    BASE, e.g. in a pull request.

    Example: skillvc check --base origin/main --allow-drop 0.02
    """
    if rev is not None and head is not None:
        raise click.UsageError("Give the revision to check once: skillvc check --base BASE REV.")
    head = rev if rev is not None else head
    from skillvc.commands.eval import comparison_lines
    from skillvc.errors import RegressionFound
    from skillvc.evaluation import compare
    from skillvc.progress import Progress
    from skillvc.workspace import open_workspace

    ws = open_workspace()
    if not ws.repo.has_file(ws.skill_relpath, base):
        # A pull request that adds the skill has nothing to regress from.
        click.echo(f"OK: {ws.skill_relpath} does not exist at {base}; nothing to compare.")
        return
    comparison = compare(ws, base, head, split, workers=workers, progress=Progress.to_stderr(quiet))
    for result in (comparison.a, comparison.b):
        require_evidence(result, ws.config.train.max_failure_rate)
    require_pairs(comparison)
    regression = is_regression(comparison, allow_drop)
    message = verdict(comparison, base, allow_drop, regression)
    if as_json:
        echo_json(
            {
                "verdict": "regression" if regression else "pass",
                "allow_drop": allow_drop,
                "base": base,
                "head": head,
                "split": split,
                "message": message,
                "comparison": comparison.to_dict(),
            }
        )
    else:
        click.echo("\n".join(comparison_lines(comparison)))
    if regression:
        raise RegressionFound(message)
    if not as_json:
        click.echo(message)


def is_regression(comparison: Comparison, allow_drop: float) -> bool:
    assert comparison.diff is not None
    return comparison.diff < -allow_drop - EPS


def verdict(comparison: Comparison, base: str, allow_drop: float, regression: bool) -> str:
    """One sentence: the head score, how far it is from the base score, and the outcome."""
    head, base_score = fmt_score(comparison.b_mean), fmt_score(comparison.a_mean)
    diff = comparison.diff or 0.0
    split = comparison.b.split
    if regression:
        return f"The skill scores {head} on {split}, {-diff:.3f} below {base_score} at {base}" + (
            f" (allowed drop {allow_drop:g})." if allow_drop else "."
        )
    if diff < -EPS:
        return (
            f"OK: the skill scores {head} on {split}, {-diff:.3f} below {base_score} at {base}, "
            f"within the allowed drop of {allow_drop:g}."
        )
    relation = "the same as" if diff <= EPS else f"{diff:.3f} above"
    return f"OK: the skill scores {head} on {split}, {relation} {base_score} at {base}."


def require_evidence(result: EvalResult, max_failure_rate: float) -> None:
    """Refuse to judge a version when too many of its target calls failed."""
    total = len(result.items)
    if total and result.errors / total > max_failure_rate:
        from skillvc.errors import BackendError

        last = next((i.error for i in result.items if i.error), "")
        raise BackendError(
            f"{result.errors} of {total} target calls failed evaluating {result.label} on "
            f"{result.split}, so the check cannot decide (first error: {last})."
        )


def require_pairs(comparison: Comparison) -> None:
    if comparison.n == 0 or comparison.diff is None:
        from skillvc.errors import BackendError

        raise BackendError(
            f"No {comparison.b.split} item was scored at both versions, so the check cannot decide."
        )
