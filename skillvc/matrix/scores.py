"""A skill version scored on every configured target model, and paired across two versions.

``evaluate_matrix`` scores one version on the primary ``[target]`` and every
``[targets.<name>]`` model, split by split; each cell is an ordinary ``evaluate`` (so each model's
calls are cached in, and answered from, the event log, and each cell is one ``evaluation``
event). ``compare_matrix`` pairs two versions model by model; ``change_of`` turns one paired
comparison into the one-sided exact sign test (McNemar's exact test on 0/1 outcomes) that
decides whether a model got *significantly* worse. ``drift`` scores the committed skill with a
new model version against the current target's scores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skillvc.core.config import Config, ModelConfig
from skillvc.core.errors import ConfigError
from skillvc.core.progress import Progress
from skillvc.review.evaluation import Comparison, EvalResult, compare, evaluate, pair
from skillvc.tasks.taskset import load_taskset
from skillvc.training.matrix_stats import mean_interval, sign_test
from skillvc.workspace.workspace import Workspace

PRIMARY = "target"  # the name of [target] in a matrix


def matrix_targets(config: Config) -> list[tuple[str, ModelConfig]]:
    """(name, model config) of the primary target, then every [targets.<name>] in file order."""
    return [(PRIMARY, config.target), *config.targets.items()]


def with_target(ws: Workspace, model: ModelConfig) -> Workspace:
    """The workspace with ``model`` as its target (everything else as configured)."""
    config = dataclasses.replace(ws.config, target=model)
    return Workspace(root=ws.root, config=config, _repo=ws._repo)


@dataclass(frozen=True)
class Cell:
    """One model on one split."""

    target: str
    model: str
    split: str
    result: EvalResult

    @property
    def interval(self) -> tuple[float, float] | None:
        metric = self.result.metric
        return mean_interval([i.value(metric) for i in self.result.items if i.ok])

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "target": self.target,
            "model": self.model,
            "split": self.split,
            "mean": r.mean,
            "interval": list(self.interval) if self.interval else None,
            "n": r.n,
            "errors": r.errors,
            "metric": r.metric,
            "fresh_calls": r.fresh_calls,
            "cost_usd": r.cost_usd,
            "event": r.event,
        }


@dataclass(frozen=True)
class MatrixResult:
    rev: str | None
    splits: tuple[str, ...]
    cells: tuple[Cell, ...]

    def cell(self, target: str, split: str) -> Cell | None:
        return next((c for c in self.cells if c.target == target and c.split == split), None)

    @property
    def targets(self) -> list[tuple[str, str]]:
        """(name, model) in order."""
        return list(dict.fromkeys((c.target, c.model) for c in self.cells))

    def to_dict(self) -> dict[str, Any]:
        return {
            "rev": self.rev,
            "splits": list(self.splits),
            "targets": [{"name": n, "model": m} for n, m in self.targets],
            "cells": [c.to_dict() for c in self.cells],
        }


def present_splits(ws: Workspace, splits: Sequence[str]) -> tuple[str, ...]:
    """The splits of ``splits`` that have items (a matrix leaves an empty test split out)."""
    taskset = load_taskset(ws.config.tasks, ws.root)
    return tuple(s for s in splits if taskset.split(s))


def evaluate_matrix(
    ws: Workspace,
    rev: str | None,
    splits: Sequence[str] = ("val", "test"),
    *,
    workers: int | None = None,
    progress: Progress | None = None,
) -> MatrixResult:
    """Score the skill at ``rev`` on every configured target model and split."""
    require_targets(ws.config)
    present = present_splits(ws, splits)
    cells = [
        Cell(
            name,
            model.model,
            split,
            evaluate(with_target(ws, model), rev, split, workers=workers, progress=progress),
        )
        for name, model in matrix_targets(ws.config)
        for split in present
    ]
    return MatrixResult(rev, present, tuple(cells))


def require_targets(config: Config) -> None:
    if not config.targets:
        raise ConfigError(
            "No [targets.<name>] table in skillvc.toml, so there is no matrix of models.",
            hint='Add e.g. [targets.small] model = "openai:gpt-4o-mini" to skillvc.toml.',
        )


@dataclass(frozen=True)
class TargetChange:
    """Two versions of a skill paired on one model: the sign test says if it got worse."""

    target: str
    model: str
    comparison: Comparison
    better: int  # items whose score went up
    worse: int  # items whose score went down
    p: float  # one-sided exact sign test that the change hurts
    alpha: float

    @property
    def regression(self) -> bool:
        return self.worse > self.better and self.p < self.alpha

    def sentence(self) -> str:
        c = self.comparison
        diff = f"{c.diff:+.3f}" if c.diff is not None else "n/a"
        verdict = "significantly worse" if self.regression else "not significantly worse"
        return (
            f"{self.target} ({self.model}): {diff} on {c.a.split}, {self.worse} items worse and "
            f"{self.better} better of {c.n} (sign test p = {self.p:.3g}): {verdict}."
        )

    def to_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "target": self.target,
            "model": self.model,
            "split": c.a.split,
            "n": c.n,
            "a_mean": c.a_mean,
            "b_mean": c.b_mean,
            "diff": c.diff,
            "better": self.better,
            "worse": self.worse,
            "p": self.p,
            "alpha": self.alpha,
            "regression": self.regression,
            "down": list(c.down),
            "up": list(c.up),
        }


def change_of(target: str, comparison: Comparison, alpha: float) -> TargetChange:
    """The sign test over the paired items of ``comparison`` (b - a on its metric)."""
    in_b = {i.id: i for i in comparison.b.items}
    metric = comparison.metric
    diffs = [
        in_b[x.id].value(metric) - x.value(metric)
        for x in comparison.a.items
        if x.ok and x.id in in_b and in_b[x.id].ok
    ]
    better, worse, p = sign_test(diffs)
    return TargetChange(target, comparison.b.model, comparison, better, worse, p, alpha)


def compare_matrix(
    ws: Workspace,
    base: str | None,
    head: str | None,
    split: str,
    *,
    alpha: float = 0.05,
    workers: int | None = None,
    progress: Progress | None = None,
    include_primary: bool = True,
) -> list[TargetChange]:
    """``base`` vs ``head`` on every configured model (the primary first)."""
    require_targets(ws.config)
    targets = matrix_targets(ws.config)[0 if include_primary else 1 :]
    return [
        change_of(
            name,
            compare(with_target(ws, model), base, head, split, workers=workers, progress=progress),
            alpha,
        )
        for name, model in targets
    ]


def regressed(changes: Sequence[TargetChange]) -> list[TargetChange]:
    return [c for c in changes if c.regression]


# -- drift ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Drift:
    """The committed skill under the current target and under a new model version."""

    rev: str
    change: TargetChange
    recorded: bool  # the current model's scores came from the event log (no fresh call)

    @property
    def retrain(self) -> bool:
        return self.change.regression

    def advice(self) -> str:
        c, now = self.change.comparison, self.change
        if self.retrain:
            return (
                f"Retrain: the skill at {self.rev} scores {c.b_mean:.3f} with {now.model}, "
                f"significantly below {c.a_mean:.3f} with {c.a.model} "
                f"({now.worse} items worse, {now.better} better, p = {now.p:.3g})."
            )
        return (
            f"No need to retrain: with {now.model} the skill at {self.rev} scores "
            f"{c.b_mean:.3f} against {c.a_mean:.3f} with {c.a.model}, no significant drop "
            f"({now.worse} items worse, {now.better} better, p = {now.p:.3g})."
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rev": self.rev,
            "current": self.change.comparison.a.model,
            "new": self.change.model,
            "recorded": self.recorded,
            "retrain": self.retrain,
            "advice": self.advice(),
            **{k: v for k, v in self.change.to_dict().items() if k not in ("target", "model")},
        }


def new_target(config: Config, name: str) -> ModelConfig:
    """``--target NEW``: a [targets.<name>] table, or a model string over [target]'s keys."""
    if name in config.targets:
        return config.targets[name]
    if ":" not in name:
        raise ConfigError(
            f"--target {name!r} is neither a [targets.<name>] table nor a model string.",
            hint="Pass a model such as openai:gpt-4o-mini, or the name of a [targets] table.",
        )
    return dataclasses.replace(config.target, model=name)


def drift(
    ws: Workspace,
    new: str,
    split: str = "val",
    *,
    rev: str = "HEAD",
    alpha: float = 0.05,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Drift:
    """Score the skill at ``rev`` with ``new`` and pair it with the current target's scores."""
    model = new_target(ws.config, new)
    before = evaluate(ws, rev, split, workers=workers, progress=progress)
    after = evaluate(with_target(ws, model), rev, split, workers=workers, progress=progress)
    change = change_of(new, pair(before, after), alpha)
    return Drift(rev, change, recorded=before.fresh_calls == 0)
