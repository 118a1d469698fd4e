"""What the ``--matrix`` options of ``eval`` and ``check`` print (kept out of the shared
command modules, which only call these)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from skillvc.core.progress import Progress
from skillvc.matrix.scores import TargetChange
from skillvc.review.output import echo_json
from skillvc.workspace.workspace import Workspace


def eval_matrix(
    ws: Workspace,
    rev: str | None,
    base: str | None,
    split: str,
    workers: int | None,
    progress: Progress,
    as_json: bool,
) -> None:
    """``eval --matrix``: the model x split table; with ``--compare BASE`` the paired changes."""
    from skillvc.matrix.render import change_lines, matrix_lines
    from skillvc.matrix.scores import compare_matrix, evaluate_matrix

    if base is not None:
        changes = compare_matrix(ws, base, rev, split, workers=workers, progress=progress)
        if as_json:
            echo_json({"base": base, "rev": rev, "matrix": [c.to_dict() for c in changes]})
        else:
            head = rev if rev is not None else "the working tree"
            click.echo("\n".join(change_lines(changes, base, head)))
        return
    result = evaluate_matrix(ws, rev, workers=workers, progress=progress)
    if as_json:
        echo_json(result.to_dict())
    else:
        label = f"{ws.skill_relpath} at {rev if rev is not None else 'the working tree'}"
        click.echo("\n".join(matrix_lines(result, label)))


def matrix_check(
    root: Path,
    base: str,
    head: str | None,
    split: str,
    skill: str | None,
    workers: int | None,
    quiet: bool,
) -> list[TargetChange]:
    from skillvc.matrix.check import check_matrix

    return check_matrix(
        root,
        base,
        head,
        split,
        skill=skill,
        alpha=_alpha(root, base, skill),
        workers=workers,
        progress=Progress.to_stderr(quiet),
    )


def _alpha(root: Path, base: str, skill: str | None) -> float:
    """BASE's [train] gate_targets_alpha (the significance level of every matrix verdict)."""
    from skillvc.core.config import CONFIG_FILE, parse_config
    from skillvc.repo.skillrepo import SkillRepo
    from skillvc.review.trust import _decode, _read_at

    with SkillRepo(root) as repo:
        raw = _read_at(repo, CONFIG_FILE, base)
    if raw is None:
        return 0.05
    config = parse_config(_decode(raw, CONFIG_FILE), root)
    return (config.for_skill(skill) if skill else config).train.gate_targets_alpha


def fail_on_regressions(changes: Sequence[TargetChange]) -> None:
    """Exit 7 naming every model the change makes significantly worse."""
    from skillvc.core.config import listing
    from skillvc.core.errors import RegressionFound

    bad = [c for c in changes if c.regression]
    if bad:
        details = "; ".join(
            f"{c.target}: {c.worse} items worse, {c.better} better, p = {c.p:.3g}" for c in bad
        )
        named = listing([f"{c.target} ({c.model})" for c in bad])
        raise RegressionFound(
            f"The change makes target model {named} significantly worse on "
            f"{bad[0].comparison.a.split} ({details}).",
            hint="See the items it breaks with: skillvc eval --matrix --compare BASE.",
        )


def report_matrix(
    ws: Workspace, report: dict[str, object], split: str = "val"
) -> dict[str, object]:
    """``report --matrix``: the run's best skill vs its seed on every target model, as
    ``{"matrix": [...], "markdown": "..."}`` (model calls answered from the log when made)."""
    from skillvc.core.errors import SkillvcError
    from skillvc.matrix.scores import compare_matrix

    base, best = report.get("base_commit"), report.get("best_commit")
    if not isinstance(base, str) or not isinstance(best, str):
        raise SkillvcError(
            "The run has no best commit yet, so there is nothing to score across models.",
            hint="Finish the run (skillvc train), then run skillvc report --matrix.",
        )
    changes = compare_matrix(ws, base, best, split, alpha=ws.config.train.gate_targets_alpha)
    lines = [
        "",
        f"## Across target models ({split}: seed {base[:10]} -> best {best[:10]})",
        "",
        "| target | model | seed | best | diff | worse | better | sign test p | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in changes:
        cmp = c.comparison
        lines.append(
            f"| {c.target} | `{c.model}` | {cmp.a_mean:.3f} | {cmp.b_mean:.3f} | "
            f"{cmp.diff:+.3f} | {c.worse} | {c.better} | {c.p:.3g} | "
            f"{'**significantly worse**' if c.regression else 'ok'} |"
        )
    return {"matrix": [c.to_dict() for c in changes], "markdown": "\n".join(lines) + "\n"}
