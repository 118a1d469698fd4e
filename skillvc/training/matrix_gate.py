"""The matrix gate of training (``[train] gate_targets = "all"``): a veto after the gate.

``Trainer.decide`` calls ``matrix_gate`` once the primary gate has accepted a candidate. The
current skill and the candidate are both run on every val item with each ``[targets.<name>]``
model (calls through the event log's cache under the run's id, so a resumed run answers them
from the log); when any model is significantly worse (the one-sided exact sign test of
``skillvc check --matrix``, at ``[train] gate_targets_alpha``), the candidate is rejected. The
result goes into the gate event as ``targets``. ``matrix_projection`` adds these calls to the
run's projected cost (an upper bound: every step's gate accepting).
"""

from __future__ import annotations

import math
from typing import Any

from skillvc.models.calls import ModelClient
from skillvc.models.harness import lazy_backend
from skillvc.training.evaluate import Evaluator, Rollout
from skillvc.training.matrix_stats import sign_test


def matrix_gate(trainer: Any, current: str, candidate: str) -> dict[str, Any] | None:
    """``{"vetoed", "targets": [...]}`` for a candidate the primary gate accepted; None when
    ``gate_targets`` is off."""
    config = trainer.config
    t = config.train
    if t.gate_targets != "all" or not config.targets:
        return None
    rows = []
    for name, model in config.targets.items():
        client = ModelClient(
            trainer.store,
            {"target": lazy_backend(model, config.root)},
            {"target": model},
            prices=config.prices,
            run_id=trainer.ctx.run_id,
            secrets=trainer.client.secrets,
        )
        evaluator = Evaluator(
            client,
            trainer.ctx.scorer,
            trainer.pool,
            judge=trainer.ctx.judge,
            scorer_options=config.tasks.scorer_options,
            samples=t.samples,
            render=trainer.render,
        )
        before = evaluator.run(current, trainer.ctx.val, "val")
        after = evaluator.run(candidate, trainer.ctx.val, "val")
        rows.append(_row(name, model.model, before, after, t.gate_metric, t.gate_targets_alpha))
    vetoed = [r["target"] for r in rows if r["regression"]]
    if vetoed:
        trainer.progress.note(f"matrix gate: rejected, significantly worse on {', '.join(vetoed)}")
    return {"vetoed": bool(vetoed), "alpha": t.gate_targets_alpha, "targets": rows}


def _row(
    name: str,
    model: str,
    before: list[Rollout],
    after: list[Rollout],
    metric: str,
    alpha: float,
) -> dict[str, Any]:
    pairs = [(a, b) for a, b in zip(before, after, strict=True) if a.ok and b.ok]
    diffs = [b.value(metric) - a.value(metric) for a, b in pairs]
    better, worse, p = sign_test(diffs)
    n = len(pairs)
    return {
        "target": name,
        "model": model,
        "n": n,
        "before": math.fsum(a.value(metric) for a, _ in pairs) / n if n else None,
        "after": math.fsum(b.value(metric) for _, b in pairs) / n if n else None,
        "better": better,
        "worse": worse,
        "p": p,
        "regression": worse > better and p < alpha,
    }


def matrix_projection(config: Any, n_val: int, steps: int) -> dict[str, Any]:
    """The matrix gate's extra target calls at most (each step's candidate and current skill
    on val, per listed model), for ``run.projected``; {} when the gate is off."""
    t = config.train
    if t.gate_targets != "all" or not config.targets:
        return {}
    per_model = 2 * n_val * t.samples * (steps + t.epochs * int(t.slow_update_gate))
    return {"matrix_calls": {name: per_model for name in config.targets}}
