"""``skillvc sleep``: harvest what is new, train on a ``skillvc/sleep/<date>`` branch, report.

Invariants:
- The user's branch, index and working tree are never touched: training runs in a separate git
  worktree (under ``.skillvc/sleep/``, removed afterwards) on a new branch made from HEAD; the
  event log is the project's own (one log, one writer lock).
- The branch holds one commit adding the reviewed, redacted task set, then the training
  commits; nothing trains on an unreviewed item.
- Paid models need a budget (``--budget-usd`` or ``[harvest] budget_usd``) before anything runs.
- The report states every gate's p-value and warns when the gain is within the noise of the
  val set (a gain of at most one val item, 1/n, or a p-value above 0.1).
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillvc.core.config import TasksConfig
from skillvc.core.errors import BudgetExceeded, ConfigError, StateConflict
from skillvc.sleep import harvest as harvesting
from skillvc.workspace.workspace import STATE_DIR, Workspace

Progress = Callable[[str], None]
NOISE_P = 0.1  # a gate whose one-sided p-value is above this is within the noise


@dataclass
class SleepResult:
    date: str
    status: str  # trained | stopped (the budget ran out) | nothing to train
    harvest: harvesting.HarvestResult
    branch: str | None = None
    base_branch: str | None = None
    base_commit: str | None = None
    run: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    report: str | None = None  # path of the Markdown report, relative to the repo root
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["harvest"] = self.harvest.to_dict()
        return data


@dataclass
class _WorktreeWorkspace(Workspace):
    """A workspace in a separate git worktree that keeps the project's own event log."""

    state_root: Path = Path(".")

    @property
    def state_dir(self) -> Path:
        return self.state_root / STATE_DIR


def is_paid(model: str) -> bool:
    return not model.startswith("sim:")


def sleep(
    ws: Workspace,
    *,
    source: str | None = None,
    dirs: Sequence[str] = (),
    budget_usd: float | None = None,
    yes: bool = False,
    date: str | None = None,
    progress: Progress | None = None,
) -> SleepResult:
    """One night: harvest new sessions, train on the reviewed items on a branch, write a report."""
    say = progress or (lambda line: None)
    config, _ = harvesting.settings(ws, source, dirs, yes)
    budget = budget_usd if budget_usd is not None else config.budget_usd
    if budget is not None and not math.isfinite(budget):  # NaN passes click's FloatRange
        raise ConfigError(
            f"--budget-usd {budget} is not a number of dollars.",
            hint="Pass --budget-usd AMOUNT, e.g. --budget-usd 2.",
        )
    paid = [m for m in (ws.config.target.model, ws.config.optimizer.model) if is_paid(m)]
    if paid and budget is None:
        raise ConfigError(
            f"skillvc sleep trains with paid models ({', '.join(paid)}) and needs a budget.",
            hint="Pass --budget-usd AMOUNT or set budget_usd in [harvest] of skillvc.toml.",
        )
    day = date or datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    try:
        # Spelled YYYY-MM-DD in the branch and report names whatever ISO form was given.
        day = datetime.date.fromisoformat(day).isoformat()
    except ValueError:
        raise ConfigError(
            f"--date '{day}' is not a date (YYYY-MM-DD).",
            hint="Pass the night's date as YYYY-MM-DD, e.g. --date 2026-01-31.",
        ) from None

    result = harvesting.harvest(ws, source=source, dirs=dirs, yes=yes, write=False, progress=say)
    outcome = SleepResult(day, "nothing to train", result)
    kinds = [k for k in result.kinds if k.rubric and any(i["reviewed"] for i in k.items)]
    rows = [i for k in kinds for i in k.items if i["reviewed"]]
    splits = {i["split"] for i in rows}
    repo = ws.repo
    if not result.kinds:
        outcome.warnings.append(
            f"No recurring task yet: none of the {result.one_offs} prompts harvested recurs in "
            f"at least {config.min_support} sessions (min_support); nothing to review or train on."
        )
    elif not {"train", "val"} <= splits:
        outcome.warnings.append(
            f"{len(rows)} reviewed harvested items ({result.unreviewed} await review): "
            "training needs reviewed items in both train and val; review them with "
            "'skillvc harvest --review'."
        )
    else:
        outcome.base_branch = repo.current_branch()
        outcome.base_commit = repo.head_sha()
        if outcome.base_commit is None:
            raise ConfigError("The repository has no commit yet.", hint="Commit the skill first.")
        outcome.branch = _free_branch(repo, f"{config.branch_prefix}/{day}")
        _train_on_branch(ws, config, kinds, outcome, budget, say)
    report_path = _write_report(ws, outcome)
    outcome.report = report_path
    with ws.store(create=True) as store:
        store.append(
            "sleep.finished",
            {
                "date": day,
                "status": outcome.status,
                "harvest": result.harvest,
                "branch": outcome.branch,
                "base_branch": outcome.base_branch,
                "base_commit": outcome.base_commit,
                "run": outcome.run,
                "report": report_path,
                "warnings": outcome.warnings,
            },
        )
    return outcome


def _free_branch(repo: Any, name: str) -> str:
    """``name``, or ``name.2``, ``name.3``... when a sleep already ran that day."""
    existing = set(
        repo.git_repo.git.for_each_ref("--format=%(refname:short)", "refs/heads/").split()
    )
    candidate, n = name, 1
    while candidate in existing:
        n += 1
        candidate = f"{name}.{n}"
    return candidate


def _train_on_branch(
    ws: Workspace,
    config: Any,
    kinds: list[harvesting.KindView],
    outcome: SleepResult,
    budget: float | None,
    say: Progress,
) -> None:
    from skillvc.repo.skillrepo import SkillRepo
    from skillvc.training.loop import train

    assert outcome.branch is not None and outcome.base_commit is not None
    git = ws.repo.git_repo.git
    where = ws.state_dir / "sleep" / outcome.branch.replace("/", "_")
    if where.exists():
        raise StateConflict(
            f"A sleep worktree is left at {where.relative_to(ws.root)}.",
            hint=f"Remove it with 'git worktree remove --force {where}', then run again.",
        )
    where.parent.mkdir(parents=True, exist_ok=True)
    # The branch is made at HEAD by the worktree itself: the user's checkout never switches.
    git.worktree("add", "-q", "-b", outcome.branch, str(where), outcome.base_commit)
    tasks_commit: str | None = None  # the branch's first commit (the task set)
    failed = False
    try:
        wt_config = dataclasses.replace(
            ws.config,
            root=where,
            tasks=TasksConfig(
                path=config.tasks,
                split_field="split",
                scorer="judge",
                scorer_options={"rubric": harvesting.combined_rubric(kinds)},
            ),
            # No early stop: every gate then evaluates all val items and has a p-value.
            train=dataclasses.replace(ws.config.train, branch=None, early_stop=False),
        )
        wt = _WorktreeWorkspace(root=where, config=wt_config, state_root=ws.root)
        wt_repo = SkillRepo(where)
        wt._repo = wt_repo
        rows = [
            {k: v for k, v in i.items() if k != "reviewed"}
            for k in kinds
            for i in k.items
            if i["reviewed"]
        ]
        import json

        body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
        wt_repo.commit_file(
            config.tasks,
            body.encode("utf-8"),
            f"skillvc sleep: {len(rows)} reviewed tasks harvested from agent sessions\n\n"
            f"Harvest {outcome.harvest.harvest}; kinds: {', '.join(k.id for k in kinds)}.\n"
            "Redacted before storing; only reviewed items are included.",
        )
        tasks_commit = git.rev_parse(outcome.branch)
        say(f"training on branch {outcome.branch} ({len(rows)} reviewed items)")
        try:
            summary = train(wt, new=True, budget_usd=budget, progress=say)
        except BudgetExceeded as exc:
            # The commits made so far stay on the branch; the report says where it stopped.
            from skillvc.review.report import latest_run

            with ws.store() as store:
                outcome.run = latest_run(store)
                # Its worktree goes away below, so it cannot be resumed: say so in the log,
                # or the next 'skillvc train' on the user's branch would try to resume it.
                store.append("run.abandoned", {"reason": "sleep budget"}, run_id=outcome.run)
            outcome.status = "stopped"
            outcome.warnings.append(exc.message)
        else:
            outcome.run = summary.run_id
            outcome.summary = dataclasses.asdict(summary)
            outcome.status = "trained"
        wt_repo.close()
    except BaseException:
        failed = True
        raise
    finally:
        try:
            git.worktree("remove", "--force", str(where))
        except Exception:  # noqa: BLE001 - leave it for 'git worktree prune'; say so below
            shutil.rmtree(where, ignore_errors=True)
            git.worktree("prune")
        if failed:
            _undo_failed_night(ws, outcome.branch, tasks_commit)


def _undo_failed_night(ws: Workspace, branch: str, tasks_commit: str | None) -> None:
    """A night that failed (a config error, an unreachable model) leaves no trace but its
    events: the branch goes when it holds no training commit, and a run it started is
    abandoned, since its worktree is gone (else 'skillvc train' would try to resume it)."""
    git = ws.repo.git_repo.git
    with ws.store(create=True) as store:
        for started in store.events(types=["run.started"]):
            if started.payload.get("branch") == branch and started.run_id:
                done = store.events(
                    run_id=started.run_id, types=["run.finished", "run.abandoned"], limit=1
                )
                if not done:
                    store.append("run.abandoned", {"reason": "sleep failed"}, run_id=started.run_id)
    tip = git.rev_parse("--verify", "-q", f"refs/heads/{branch}")
    if tasks_commit is None or tip == tasks_commit:
        git.branch("-D", branch)


def _write_report(ws: Workspace, outcome: SleepResult) -> str:
    """The Markdown report (a pull-request body) under .skillvc/reports/; its relative path."""
    from skillvc.repo.skillrepo import write_atomic

    text = render_report(ws, outcome)
    name = f"sleep-{(outcome.branch or outcome.date).rsplit('/', 1)[-1]}.md"
    target = ws.state_dir / "reports" / name
    write_atomic(target, text.encode("utf-8"))
    return target.relative_to(ws.root).as_posix()


def significance(report: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Lines listing every gate's p-value, and the warnings about noise."""
    n_val = int((report.get("dataset", {}).get("counts") or {}).get("val") or 0)
    lines = [
        "| gate | epoch | decision | val before -> after | p-value (one-sided) |",
        "|---|---|---|---|---|",
    ]
    warnings: list[str] = []
    for s in report.get("steps", []):
        if s.get("decision") == "no candidate":
            continue
        p = s.get("p_value")
        shown = f"{p:.3g} ({s.get('test')})" if p is not None else "n/a"
        before, after = s.get("val_before"), s.get("val_after")
        scores = (
            f"{before:.3f} -> {after:.3f}" if before is not None and after is not None else "n/a"
        )
        step = "slow update" if s.get("kind") == "slow_update" else f"step {s.get('step')}"
        lines.append(f"| {step} | {s.get('epoch')} | {s.get('decision')} | {scores} | {shown} |")
        if s.get("decision") == "accepted" and (p is None or p > NOISE_P):
            warnings.append(
                f"{step[:1].upper()}{step[1:]} was accepted with p = {shown}: above "
                f"{NOISE_P}, the gain may be noise."
            )
    scores = report.get("scores", {})
    base, best = scores.get("baseline_val"), scores.get("best_val")
    if n_val and base is not None and best is not None:
        gain = best - base
        if 0 < gain <= 1 / n_val + 1e-12:
            warnings.append(
                f"The val gain of {gain:+.3f} is at most one item of {n_val} (1/n = "
                f"{1 / n_val:.3f}): within the noise of the val set's size."
            )
    if n_val and n_val < 20:
        warnings.append(
            f"The val set has only {n_val} items: one item moves the score by {1 / n_val:.3f}."
        )
    return lines, warnings


def render_report(ws: Workspace, outcome: SleepResult) -> str:
    h = outcome.harvest
    out = [f"# skillvc sleep {outcome.date}", ""]
    out.append(
        f"Harvest {h.harvest}: {harvesting.counted(h.sessions_new, 'new session')} "
        f"({h.sessions_seen} already harvested), {harvesting.counted(h.exchanges, 'task prompt')}"
        f" in all, {harvesting.counted(len(h.kinds), 'recurring kind')}, "
        f"{harvesting.counted(h.one_offs, 'one-off prompt')} left out, {h.unreviewed} items "
        "awaiting review."
    )
    redacted = ", ".join(f"{k} {v}" for k, v in h.redactions.items()) or "nothing"
    out.append(f"Redacted before storing: {redacted}.")
    out.append("")
    if h.kinds:
        out += ["| kind | sessions | items (reviewed) | tasks like |", "|---|---|---|---|"]
        for k in h.kinds:
            reviewed = sum(1 for i in k.items if i["reviewed"])
            name = k.name.replace("|", "\\|")
            out.append(f"| {k.id} | {k.support} | {len(k.items)} ({reviewed}) | {name} |")
        out.append("")
    if outcome.run is None:
        out += [f"Nothing was trained. {' '.join(outcome.warnings)}", ""]
        return "\n".join(out)
    from skillvc.review.report import render_markdown, run_report

    with ws.store() as store:
        report = run_report(store, outcome.run, ws.config.skill_relpath)
    lines, warnings = significance(report)
    outcome.warnings.extend(warnings)
    out.append(
        f"Trained on branch `{outcome.branch}` from `{outcome.base_branch or 'HEAD'}` at "
        f"{(outcome.base_commit or '')[:10]}; the base branch was not touched."
    )
    out += ["", "## Significance", "", *lines, ""]
    out += [f"> **Warning:** {w}" for w in warnings] or ["No gain is within the noise."]
    out += ["", render_markdown(report)]
    return "\n".join(out)
