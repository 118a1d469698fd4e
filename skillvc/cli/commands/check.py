"""``skillvc check --base BASE [REV] [--allow-drop X] [--allow-config-change] [--json]``.

The gate of ``skillvc train`` applied to any change, such as a human edit in a pull request:
evaluate the skill at BASE and at REV (default: the working-tree file; ``--head REV`` is the
older spelling), pair them item by item and fail when the change scores worse than its base by
more than the allowed drop. The library side is ``skillvc.review.trust.check_change``; this module
parses options and renders.

Invariants:

* The base decides: ``skillvc.toml`` and the task files as committed at BASE give the skill
  path, task set, scorer, models, base URLs, harness and prices for both sides; the head only
  brings the skill text (see ``skillvc.review.trust``). A head that changes ``skillvc.toml``, a task
  file or the skill's path is reported and fails (exit 7, ``ConfigChanged``) unless
  ``--allow-config-change`` is given; the verdict is the base's either way.
* Needs nothing but the repository: the event log is created when missing, so it runs in a
  fresh CI clone; model calls made before are answered from the log.
* The decision uses the paired difference over the items both versions scored: it fails
  (exit 7, ``RegressionFound``) when ``head - base < -allow_drop``; otherwise it exits 0.
* It never passes on missing evidence: when more than the base's ``[train] max_failure_rate``
  of either evaluation's target calls failed, or no item was scored by both, it stops with a
  backend error (exit 6) instead of a verdict; so it does when HEAD failed on an item BASE
  scored (a failed item would be left out of the pairing, hiding what it breaks).

* A skill package is checked as one unit: each side is its own directory (text files, and for
  an agent harness its scripts and assets too), read with BASE's ``include``/``exclude`` and
  given to BASE's target; a HEAD whose package has a broken relative link (or one to a
  symbolic link, which a package never follows) or a file that is not UTF-8 is refused before
  any model call (exit 5). Linked files cut for the size budget and symbolic links left out
  are named on stderr (``warning: ...``) and in each side's ``package`` object.

JSON (``--json``), stable keys: ``{"verdict": "pass" | "regression" | "config_changed",
"allow_drop", "base" (the BASE given), "head" (the HEAD given, or null for the working tree),
"split", "message", "comparison": <the object of ``skillvc eval --compare``: a is BASE, b is
HEAD; null when there is nothing to compare>, "changes_allowed", "config_changes" (dotted keys
of skillvc.toml), "config_error", "task_files_changed", "task_changes": {"train" | "val" |
"test": {"added", "removed", "edited"}}, "task_error", "skill": {"base", "head"}, "routing"}``.
The JSON is printed before a failing exit 7, so CI can keep it.

Routing (``[routing]`` at BASE, ``skillvc.review.routingcheck``): a change of any skill's
``description`` (or listed name) has the library's routing measured at BASE and at REV on
BASE's trigger set with BASE's selector; the text report gains a routing section and the JSON a
``"routing"`` object (null when no description changed: then no call is made). Routing that
gets significantly worse, or under which one skill's recall falls significantly, fails with
exit 7 (``RegressionFound``); a change of ``[routing]`` or a trigger file fails as a config
change.

Many skills (``[skills.<name>]``): every skill of BASE's config is checked (``--skill NAME``: one),
each under its own settings; the text report has a ``== skill NAME ==`` section per skill, the
JSON is ``{"verdict", "skills": {NAME: <the object above>}, "routing"}``, and the check fails
when any skill fails (config changes first, then regressions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from skillvc.review.output import echo_json, json_option, skill_option, split_option

if TYPE_CHECKING:
    from skillvc.review.routingcheck import RoutingCheck
    from skillvc.review.trust import CheckResult

MAX_ITEMS = 20  # ids named per line of the text report; --json lists them all


@click.command("check")
@click.argument("rev", metavar="[REV]", required=False)
# The env vars are what the pre-commit framework sets for pre-push hooks (.pre-commit-hooks.yaml).
@click.option(
    "--base",
    required=True,
    metavar="REV",
    envvar="PRE_COMMIT_FROM_REF",
    help="The revision to compare against.",
)
# The older spelling of the positional REV (the pre-push hook writes it), kept working.
@click.option("--head", metavar="REV", envvar="PRE_COMMIT_TO_REF", help="Same as REV.")
@click.option(
    "--allow-drop",
    # NaN passes FloatRange (every comparison with it is false) and would pass any drop.
    type=click.FloatRange(min=0.0, max=1.0),
    callback=lambda ctx, param, value: _not_nan(param, value),
    default=0.0,
    show_default=True,
    help="Tolerate a score drop up to this much (on the gate metric's 0..1 scale).",
)
@split_option("gate on")
@click.option(
    "--allow-config-change",
    is_flag=True,
    help="Do not fail when HEAD changes skillvc.toml, a task file or the skill's path (the "
    "verdict still uses BASE's). Only for a trusted caller, e.g. a maintainer-run workflow.",
)
@click.option("--workers", type=click.IntRange(min=1), help="Model calls in flight at once.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option(
    "--matrix",
    is_flag=True,
    help="Also fail when any [targets.<name>] model gets significantly worse (docs/matrix.md).",
)
@click.option("--trust-judge", is_flag=True, help="Let an uncalibrated or disagreeing judge gate.")
@skill_option
@json_option
def command(
    skill: str | None,
    rev: str | None,
    base: str,
    head: str | None,
    allow_drop: float,
    split: str,
    allow_config_change: bool,
    workers: int | None,
    quiet: bool,
    matrix: bool,
    trust_judge: bool,
    as_json: bool,
) -> None:
    """Fail (exit 7) when the skill at REV (default: the working tree) scores worse than at
    BASE, e.g. in a pull request.

    Everything that decides the verdict (skill path, task files, scorer, models, base URLs,
    harness, prices) is taken from BASE; a HEAD that changes it fails too.

    Example: skillvc check --base origin/main --allow-drop 0.02
    """
    if rev is not None and head is not None:
        raise click.UsageError("Give the revision to check once: skillvc check --base BASE REV.")
    head = rev if rev is not None else head
    from skillvc.core.errors import ConfigChanged, RegressionFound
    from skillvc.core.progress import Progress
    from skillvc.judge.trust import require_trusted_judge_at
    from skillvc.review.trust import base_warning, check_skills
    from skillvc.workspace.workspace import find_root

    require_trusted_judge_at(find_root(), base, skill, trust_judge)
    warning = base_warning(find_root(), base, head)
    if warning is not None:
        click.echo(f"warning: {warning}", err=True)
    results = check_skills(
        find_root(),
        base,
        head,
        split,
        skill=skill,
        allow_drop=allow_drop,
        allow_config_change=allow_config_change,
        workers=workers,
        progress=Progress.to_stderr(quiet),
    )
    from skillvc.review.routingcheck import check_routing_change

    # Descriptions decide which skill loads: a change of one is measured on BASE's trigger set.
    routing = check_routing_change(
        find_root(),
        base,
        head,
        split,
        allow_config_change=allow_config_change,
        workers=workers,
        progress=Progress.to_stderr(quiet),
    )
    from skillvc.cli.commands.eval import echo_notes

    # A skill package's notes (linked files cut, symbolic links left out), each side's.
    echo_notes([r for _, c in results if c.comparison for r in (c.comparison.a, c.comparison.b)])
    if results[0][0] is not None:  # many skills: a verdict per skill
        if matrix:
            raise click.UsageError(
                "--matrix checks a config with one skill; [skills.<name>] configs are not "
                "supported yet (use skillvc eval --matrix --compare BASE --skill NAME)."
            )
        _many(results, as_json, routing)
        return
    result = results[0][1]
    changes = None
    if matrix and result.comparison is not None and not result.refused_changes:
        from skillvc.matrix.cli import matrix_check

        changes = matrix_check(find_root(), base, head, split, skill, workers, quiet)
    if as_json:
        extra = {} if changes is None else {"matrix": [c.to_dict() for c in changes]}
        data = result.to_dict() | {"routing": None if routing is None else routing.to_dict()}
        data["verdict"] = _with_routing(data["verdict"], routing)
        echo_json(data | extra)
    else:
        from skillvc.secrets import scrub

        # Posted as a pull-request comment: through the redaction pipeline first.
        lines = result_lines(result) + routing_lines(routing, verdict=result.regression)
        if changes:
            from skillvc.matrix.render import change_lines as matrix_lines

            lines = [*lines, *matrix_lines(changes, base, result.head_label)]
        click.echo(scrub("\n".join(lines)))
    if result.refused_changes:
        raise ConfigChanged(
            f"The change edits {result.changes.summary()}, which the check takes from "
            f"{result.base} only."
        )
    _fail_on_routing_changes(routing)
    if result.regression:
        raise RegressionFound(result.message)
    if routing is not None and routing.regression:
        raise RegressionFound(routing.message())
    if changes:
        from skillvc.matrix.cli import fail_on_regressions

        fail_on_regressions(changes)


def _not_nan(param: click.Parameter, value: float) -> float:
    if value != value:
        raise click.BadParameter("nan is not a number.", param=param)
    return value


def result_lines(result: CheckResult) -> list[str]:
    """The text report: the comparison, what HEAD changed, and the verdict (unless it is a
    regression, which is the error sentence)."""
    from skillvc.cli.commands.eval import comparison_lines

    lines = [] if result.comparison is None else comparison_lines(result.comparison)
    from skillvc.training.significance import stated

    said = result.significance()
    if said is not None and said["direction"] == "unchanged":
        lines.append(f"significance: no change to compare ({said['reason']})")
    elif said is not None:
        lines.append(
            f"significance: {result.head_label} is {said['direction']} (exact sign test on the "
            f"flipped items): {stated(said['p_value'], said['alpha'])}"
        )
        if said["warning"]:
            lines.append(f"warning: {said['warning']}")
    lines += change_lines(result)
    if not result.regression or result.refused_changes:
        lines.append(result.message)
    return lines


def change_lines(result: CheckResult) -> list[str]:
    from skillvc.review.output import shown
    from skillvc.review.trust import named

    changes, at = result.changes, result.head_label
    if not changes.changed:
        return []
    lines = []
    if changes.config_error:
        lines.append(f"{changes.config_error} at {at}.")
    elif changes.config:
        lines.append(f"skillvc.toml differs at {at}: {named(changes.config, MAX_ITEMS)}.")
    if changes.skill_base != changes.skill_head:
        lines.append(
            f"The skill moved at {at}: {changes.skill_base} -> {shown(changes.skill_head)}."
        )
    if changes.task_files:
        lines.append(f"Task files that differ at {at}: {named(changes.task_files, MAX_ITEMS)}.")
    if changes.task_error:
        lines.append(f"The task set at {at} cannot be read: {changes.task_error}.")
    for split, items in changes.items.items():
        parts = [
            f"{kind} {named(ids, MAX_ITEMS)}"
            for kind, ids in (
                ("removed", items.removed),
                ("added", items.added),
                ("edited", items.edited),
            )
            if ids
        ]
        if parts:
            lines.append(f"{split} items at {at}: {'; '.join(parts)}.")
    lines.append(f"The verdict uses skillvc.toml and the task files of {result.base}.")
    return lines


def _many(
    results: list[tuple[str | None, CheckResult]], as_json: bool, routing: RoutingCheck | None
) -> None:
    """Report a verdict per skill, then the library's routing; fail as the worst one does
    (config changes, then regressions)."""
    from skillvc.core.config import listing
    from skillvc.core.errors import ConfigChanged, RegressionFound

    refused = [str(name) for name, r in results if r.refused_changes]
    regressed = [str(name) for name, r in results if r.regression and not r.refused_changes]
    worst = "config_changed" if refused else ("regression" if regressed else "pass")
    if as_json:
        echo_json(
            {
                "verdict": _with_routing(worst, routing),
                "skills": {name: r.to_dict() for name, r in results},
                "routing": None if routing is None else routing.to_dict(),
            }
        )
    else:
        for name, result in results:
            click.echo(f"== skill {name} ==")
            lines = result_lines(result)
            if result.regression and not result.refused_changes:
                lines.append(result.message)  # the error sentence names one skill only
            from skillvc.secrets import scrub

            click.echo(scrub("\n".join(lines)))
        if routing is not None:
            from skillvc.secrets import scrub

            said = routing_lines(routing, verdict=bool(refused or regressed))
            click.echo(scrub("\n".join(["== routing ==", *said])))
    if refused:
        raise ConfigChanged(
            f"The change edits what the check takes from BASE only, for skill {listing(refused)}."
        )
    _fail_on_routing_changes(routing)
    if regressed:
        raise RegressionFound(f"The change regresses skill {listing(regressed)}.")
    if routing is not None and routing.regression:
        raise RegressionFound(routing.message())


def _with_routing(verdict: str, routing: RoutingCheck | None) -> str:
    """The check's verdict with the routing's: config changes first, then regressions."""
    if routing is None or verdict == "config_changed":
        return verdict
    if routing.refused_changes:
        return "config_changed"
    return "regression" if routing.regression or verdict == "regression" else verdict


def _fail_on_routing_changes(routing: RoutingCheck | None) -> None:
    from skillvc.core.errors import ConfigChanged

    if routing is not None and routing.refused_changes:
        from skillvc.core.config import listing

        raise ConfigChanged(
            f"The change edits {listing([*routing.config_changes, *routing.trigger_files])}, "
            f"which the routing check takes from {routing.base} only."
        )


def routing_lines(routing: RoutingCheck | None, *, verdict: bool = False) -> list[str]:
    """The routing section: the library score and each skill's F1 before and after, the
    significance, what HEAD changed of [routing], and the verdict (unless it fails, which is
    the error sentence; ``verdict``: even then, where another failure is the error)."""
    if routing is None:
        return []
    from skillvc.review.trust import named
    from skillvc.training.significance import stated

    at = routing.head_label
    lines = []
    if routing.measured:
        assert routing.before is not None and routing.after is not None
        up, down = routing.flips()
        lines += [
            f"routing on {routing.split} (selector {routing.model}; description changed: "
            f"{named(routing.changed, MAX_ITEMS)}):",
            f"  library score {_f(routing.before.library)} at {routing.base} -> "
            f"{_f(routing.after.library)} at {at} (n={routing.after.n}; flipped {len(up)} "
            f"up, {len(down)} down)",
            f"  {'skill':<16} {'f1 before':>10} {'f1 after':>10} {'recall':>16}",
        ]
        for name, row in routing.skill_changes().items():
            recall = f"{_f(row['recall_before'])} -> {_f(row['recall_after'])}"
            mark = "  *" if name in routing.changed else ""
            lines.append(
                f"  {name[:16]:<16} {_f(row['f1_before']):>10} {_f(row['f1_after']):>10} "
                f"{recall:>16}{mark}"
            )
        gate = routing.verdict()
        if gate is not None and gate.shifts:
            lines.append(
                "own prompts lost per skill (exact sign test of a loss): " + gate.loss_line()
            )
        if routing.direction == "unchanged":
            lines.append("routing significance: no prompt is routed differently")
        else:
            lines.append(
                f"routing significance: {at} routes {routing.direction} (exact sign test on "
                f"the flipped prompts): {stated(routing.p_value, routing.alpha)}"
            )
    if routing.config_changes:
        lines.append(f"[routing] differs at {at}: {named(routing.config_changes, MAX_ITEMS)}.")
    if routing.trigger_files:
        lines.append(f"Trigger files that differ at {at}: {named(routing.trigger_files)}.")
    if routing.config_changes or routing.trigger_files:
        lines.append(f"The routing verdict uses [routing] and the trigger files of {routing.base}.")
    if routing.measured and (verdict or not routing.regression):
        lines.append(routing.message())
    return lines


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
