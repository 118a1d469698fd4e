"""``skillvc eval [REV] [--split val|test|train] [--compare BASE] [--json]``.

Scores the skill file as it is at git revision REV (default: the working-tree file) on a split,
through the configured target and scorer. Every model call is answered from the event log when
it was made before, so re-running it on an unchanged skill costs nothing. One ``evaluation``
event is recorded per distinct (skill content, split, data set, target, scorer).

With ``--compare BASE`` both versions are evaluated and paired item by item: BASE is ``a``,
REV (or the working tree) is ``b``, and the difference is ``b - a``.

JSON (``--json``), stable keys. Without --compare, one evaluation object:

    rev             the revision given, or null for the working tree
    sha             the commit it resolved to, or "worktree"
    skill           sha256 of the skill text (a blob in the event log)
    split           train | val | test
    dataset         the task set's content hash
    model           the target model string
    metric          the gate metric of ``mean`` (hard | soft | mixed)
    mean, hard, soft    means over the scored items (null when none was scored)
    stderr          standard error of ``mean`` (null below two scored items)
    n               items scored;  errors: items whose target call failed (not scored)
    items           [{id, hard, soft, error, expected, got, output, output_blob, activated}]
                    in split order (hard/soft null when error is set; output is the full
                    answer text, output_blob its hash in the event log;
                    activated: did an agent target load the skill, null for other targets)
    activation      {loaded, of, rate}: items whose agent loaded the skill (null: no agent)
    failures        ids of scored items with hard score 0
    calls           model answers used;  fresh_calls: of those, calls that reached a model
    failed_calls    calls that failed after their retries (their items are errors)
    tokens          prompt + completion tokens of those answers
    cost_usd        dollars, or null when a call's price is unknown
    unpriced_calls  calls without a known price
    event           id of the evaluation event;  recorded: false when it already existed
    package         null for a single-file skill; for a skill package {included, cut,
                    carried, skipped}: the linked files the chat target is sent, those left
                    out whole to keep within [skill] reference_bytes and the token cap, the
                    carried files (scripts, assets) an installing harness writes beside
                    SKILL.md, and the symbolic links left out of the package (never followed);
                    package-relative paths. stderr warns of cut files and skipped links.

With --compare, ``{"a": <evaluation of BASE>, "b": <evaluation of REV>, "metric", "n"
(items scored in both), "a_mean", "b_mean" (means over those items), "diff" (b - a), "stderr"
(of diff), "flipped": {"up": [ids], "down": [ids]}}``; up = hard 0 in a and 1 in b.

With --baseline BASE (``none``: the target with no skill at all), the --compare object with
BASE as ``a`` plus ``"worth": {split, baseline, baseline_label, rev, skill, skill_label,
metric, n, baseline_mean, skill_mean, diff, stderr, up, down, p_value, alpha, verdict, stated,
beats, sentence}``: the exact sign test on the flipped items at the gate's alpha, recorded as a
``skill.worth`` event that ``report`` shows.

Exit codes: 0 done, 3 unknown revision or missing skill file, 5 bad task set or split, or a
skill that fails validation or is over [skill] max_tokens, 6 model backend failure or every
item errored (when only some errored, stderr says how many).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from skillvc.review.output import (
    echo_json,
    echo_rows,
    fmt_score,
    json_option,
    skill_option,
    split_option,
    table_options,
)
from skillvc.terminal.fit import fits_terminal

if TYPE_CHECKING:
    from skillvc.review.evaluation import Comparison, EvalResult

MAX_SHOWN = 20  # failing items listed in text output; --json has them all


@click.command("eval")
@click.argument("rev", required=False)
@split_option("score on")
@click.option("--compare", "base", metavar="BASE", help="Also evaluate BASE and pair the two.")
@click.option(
    "--baseline",
    metavar="BASE",
    help="The skill's worth: pair it with BASE ('none': no skill at all, or a revision) "
    "and say whether it beats it (sign test).",
)
@click.option("--workers", type=click.IntRange(min=1), help="Model calls in flight at once.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option(
    "--matrix",
    is_flag=True,
    help="Score on [target] and every [targets.<name>] model (val and test; with --compare, "
    "the --split only). See docs/matrix.md.",
)
@click.option(
    "--routing",
    is_flag=True,
    help="Measure the library's routing on the [routing] trigger set instead: per-skill "
    "precision, recall, F1 and the confusion matrix (--csv: the matrix). See docs/routing.md.",
)
@click.option(
    "--skill-file",
    metavar="PATH",
    help="Score this file of the work tree as the skill (e.g. a paper's trained skill "
    "copied in) instead of a revision.",
)
@skill_option
@json_option
@table_options
@fits_terminal
def command(
    skill_file: str | None,
    routing: bool,
    skill: str | None,
    rev: str | None,
    split: str,
    base: str | None,
    baseline: str | None,
    workers: int | None,
    quiet: bool,
    matrix: bool,
    as_json: bool,
    table_format: str | None,
) -> None:
    """Score the skill at REV (default: the working-tree file) on a split.

    Model calls made before are answered from the event log, so re-running is free.
    Examples: skillvc eval HEAD~1 --split test; skillvc eval --compare main;
    skillvc eval --baseline none (the skill against no skill);
    skillvc eval --skill-file baselines/gpt5.5_skill.md --split test
    """
    from skillvc.core.progress import Progress
    from skillvc.review.evaluation import compare, evaluate
    from skillvc.workspace.workspace import open_workspace

    if routing:
        eval_routing(rev, split, workers, quiet, as_json, table_format)
        return
    ws = open_workspace(skill=skill)
    if skill_file is not None and (rev or base or baseline or matrix):
        raise click.UsageError("--skill-file scores one file: give no REV, --compare, "
                               "--baseline or --matrix with it.")  # fmt: skip
    if baseline is not None:
        from skillvc.review.worth import worth

        found = worth(ws, rev, baseline, split, workers=workers, progress=Progress.to_stderr(quiet))
        echo_notes([found.comparison.a, found.comparison.b])
        if as_json:
            echo_json(found.to_dict())
        else:
            click.echo("\n".join([*comparison_lines(found.comparison), found.sentence()]))
        return
    if matrix:
        from skillvc.matrix.cli import eval_matrix

        eval_matrix(ws, rev, base, split, workers, Progress.to_stderr(quiet), as_json)
        return
    if base is None:
        result = evaluate(
            ws, rev, split, workers=workers, progress=Progress.to_stderr(quiet),
            skill_file=skill_file,
        )  # fmt: skip
        echo_notes([result])
        if result.errors:
            total = result.n + result.errors
            click.echo(
                f"warning: {result.errors} of {total} items errored and are not scored; "
                f"the score covers the other {result.n}.",
                err=True,
            )
        if table_format:
            echo_rows([i.to_dict() for i in result.items], table_format)
        elif as_json:
            echo_json(result.to_dict())
        else:
            click.echo("\n".join(evaluation_lines(result, ws.skill_relpath)))
        return
    comparison = compare(ws, base, rev, split, workers=workers, progress=Progress.to_stderr(quiet))
    echo_notes([comparison.a, comparison.b])
    if table_format:
        echo_rows(paired_rows(comparison), table_format)
    elif as_json:
        echo_json(comparison.to_dict())
    else:
        click.echo("\n".join(comparison_lines(comparison)))


def eval_routing(
    rev: str | None,
    split: str,
    workers: int | None,
    quiet: bool,
    as_json: bool,
    table_format: str | None,
) -> None:
    """``eval --routing``: the whole library's routing (every skill, so no --skill)."""
    from skillvc.core.progress import Progress
    from skillvc.routing.evaluate import evaluate_routing
    from skillvc.routing.render import csv_rows, score_lines
    from skillvc.workspace.workspace import open_workspace

    ws = open_workspace(any_skill=True)
    result, facts = evaluate_routing(
        ws, rev, split, workers=workers, progress=Progress.to_stderr(quiet)
    )
    data = result.to_dict()
    if table_format:
        echo_rows(csv_rows(data["confusion"]), table_format)
    elif as_json:
        echo_json({**facts, **data, "picks": [p.to_dict() for p in result.picks]})
    else:
        where = "the working tree" if rev is None else f"{rev} ({facts['sha'][:10]})"
        how = (
            f"{facts['agent']} activation: the first skill the agent loaded"
            if facts.get("agent")
            else "select_skill tool"
            if facts["tools"]
            else "text"
        )
        click.echo(f"routing of {where} on {split}, selector {facts['model']} (picks by {how})")
        click.echo("\n".join(score_lines(data)))
        click.echo(
            f"model calls {facts['calls']} ({facts['fresh_calls']} made, "
            f"{facts['calls'] - facts['fresh_calls']} answered from the log)"
        )


def echo_notes(results: Sequence[EvalResult]) -> None:
    """Print on stderr what a skill package's target was not given (``EvalResult.notes``)."""
    for note in dict.fromkeys(n for r in results for n in r.notes):
        click.echo(f"warning: {note}", err=True)


def paired_rows(c: Comparison) -> list[dict[str, Any]]:
    """One row per item of a comparison: a's and b's scores and errors side by side."""
    in_b = {i.id: i for i in c.b.items}
    rows = []
    for a in c.a.items:
        b = in_b.get(a.id)
        rows.append(
            {
                "id": a.id,
                "a_hard": a.hard,
                "a_soft": a.soft,
                "a_error": a.error,
                "b_hard": b.hard if b else None,
                "b_soft": b.soft if b else None,
                "b_error": b.error if b else None,
                "expected": a.expected,
                "a_got": a.got,
                "b_got": b.got if b else None,
            }
        )
    return rows


def version_name(result: EvalResult) -> str:
    if result.rev is None:
        return "the working tree"
    if result.sha == "worktree":  # --skill-file: a file of the work tree, not a revision
        return f"--skill-file {result.rev}"
    return f"{result.rev} ({result.sha[:10]})"


def score_text(result: EvalResult) -> str:
    """``0.533 ± 0.092 (hard, n=30)``, plus the errors when there were any."""
    err = "" if result.stderr is None else f" ± {result.stderr:.3f}"
    errors = f", {result.errors} errors not scored" if result.errors else ""
    return f"{fmt_score(result.mean)}{err} ({result.metric}, n={result.n}{errors})"


def cost_text(cost_usd: float | None, unpriced: int) -> str:
    if cost_usd is None:
        return f"price unknown ({unpriced} calls without a price)"
    return f"${cost_usd:.4f}"


def calls_text(results: Sequence[EvalResult]) -> str:
    """Model calls, tokens and cost of one or more evaluations, summed."""
    calls = sum(r.calls for r in results)
    fresh = sum(r.fresh_calls for r in results)
    failed = sum(r.failed_calls for r in results)
    costs = [r.cost_usd for r in results]
    cost = None if None in costs else sum(c for c in costs if c is not None)
    unpriced = sum(r.unpriced_calls for r in results)
    failed_text = f", {failed} failed" if failed else ""
    return (
        f"model calls {calls} ({fresh} made, {calls - fresh} answered from the log{failed_text}), "
        f"tokens {sum(r.tokens for r in results):,}, cost {cost_text(cost, unpriced)}"
    )


def evaluation_lines(result: EvalResult, skill_path: str) -> list[str]:
    lines = [
        f"{skill_path} at {version_name(result)} on {result.split}: {score_text(result)}",
        f"  hard {fmt_score(result.hard)}  soft {fmt_score(result.soft)}  target {result.model}",
    ]
    act = result.activation
    if act is not None:
        lines.append(
            f"  skill loaded by the agent in {act['loaded']}/{act['of']} items ({act['rate']:.0%})"
        )
    failures = result.failures()
    if failures:
        lines.append(f"failures ({len(failures)}):")
        lines.extend(
            f"  {f.id}  expected {f.expected!r}  got {f.got!r}" for f in failures[:MAX_SHOWN]
        )
        if len(failures) > MAX_SHOWN:
            lines.append(f"  ... and {len(failures) - MAX_SHOWN} more (--json lists them all)")
    errors = [i for i in result.items if not i.ok]
    if errors:
        lines.append(f"errors, not scored ({len(errors)}):")
        lines.extend(f"  {e.id}  {e.error}" for e in errors[:MAX_SHOWN])
    lines.append(calls_text([result]))
    return lines


def comparison_lines(c: Comparison) -> list[str]:
    diff = "-" if c.diff is None else f"{c.diff:+.3f}"
    err = "" if c.stderr is None else f" ± {c.stderr:.3f}"
    lines = [
        f"a  {version_name(c.a)}: {score_text(c.a)}",
        f"b  {version_name(c.b)}: {score_text(c.b)}",
        f"paired difference (b - a) on {c.b.split}: {diff}{err} over {c.n} items "
        f"({fmt_score(c.a_mean)} -> {fmt_score(c.b_mean)})",
        flipped_line("up (b fixes)", c.up),
        flipped_line("down (b breaks)", c.down),
        calls_text([c.a, c.b]),
    ]
    return lines


def flipped_line(label: str, ids: tuple[str, ...]) -> str:
    shown = ", ".join(ids[:MAX_SHOWN]) + (" ..." if len(ids) > MAX_SHOWN else "")
    return f"flipped {label}: {len(ids)}" + (f"  {shown}" if ids else "")
