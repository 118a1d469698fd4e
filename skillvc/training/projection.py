"""What a run will cost: calls, tokens and dollars projected from its baseline evaluation.

After the baseline (every val item run once per sample with the seed skill), the run knows
what one target call (and one judge call, when the scorer asks a judge) really costs. The
projection multiplies that by the calls the planned steps make, as an upper bound:

* target calls: per epoch, every train item once (rollouts) plus, per step, every val item
  (the gate's candidate; the current skill's answers are in the log) and, at the epoch end,
  the slow update's before/after rollouts on its items and its gate; at the end, the seed and
  the best skill on test. Early stopping and cached answers only make it cheaper.
* judge calls: as many per target call as the baseline made.
* optimizer calls: per step one reflection per minibatch of failures and of successes
  (``ceil(batch / minibatch) + 1`` at most), per epoch one slow update and one meta update.
  Each is estimated at two copies of the skill (the slow update shows two versions), the
  cases of one minibatch (a target call's tokens minus the skill's, each) and
  ``TEMPLATE_TOKENS`` of prompt, plus ``OPTIMIZER_COMPLETION_TOKENS`` of answer, priced at
  the optimizer's input and output prices. Repair calls after unparsable answers are not
  counted. The skill's tokens are estimated as in ``skillvc.skill.preflight`` (bytes / 4).

Invariant: pure arithmetic over the baseline's statistics and the config, so a resumed run
projects exactly what the interrupted one did (its baseline answers come from the log).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from skillvc.core.config import Config
from skillvc.core.errors import StateConflict
from skillvc.core.pricing import price_for
from skillvc.models.calls import RoleStats

OPTIMIZER_COMPLETION_TOKENS = 1_000  # a JSON list of a few edits with rationales
TEMPLATE_TOKENS = 500  # the optimizer's instructions around the skill and cases
UNBUDGETED_LIMIT_USD = 20.0  # a run without a budget stops before step 1 when projected above


class ProjectionTooHigh(StateConflict):
    """A run without a budget is projected to cost more than an unbudgeted run may."""


@dataclass(frozen=True)
class Projection:
    """Calls, tokens and cost of the whole run (baseline included); cost counts priced
    models only, and ``unpriced`` names the models whose price is unknown."""

    calls: dict[str, int]
    tokens: int
    cost_usd: float
    unpriced: tuple[str, ...]

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": dict(self.calls),
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "unpriced": list(self.unpriced),
        }

    def sentence(self) -> str:
        cost = f"${self.cost_usd:,.2f}"
        if self.unpriced:
            cost += f" plus unpriced calls to {', '.join(self.unpriced)}"
        return f"{self.total_calls:,} calls, {self.tokens:,} tokens, {cost}"


def project(
    config: Config,
    baseline: Mapping[str, RoleStats],
    *,
    n_train: int,
    n_val: int,
    n_test: int,
    n_slow: int,
    skill_tokens: int,
    local: Sequence[str] = (),
) -> Projection:
    """The run's projected calls, tokens and cost from the baseline's per-call statistics;
    ``local``: models on a local server, which cost nothing unless ``[prices]`` says."""
    t = config.train
    steps_per_epoch = math.ceil(n_train / t.batch_size)
    steps = t.epochs * steps_per_epoch
    slow_updates = max(0, t.epochs - t.slow_update_from_epoch + 1) if t.slow_update else 0
    per_slow_update = 2 * n_slow + (n_val if t.slow_update_gate else 0)
    per_epoch = n_train + steps_per_epoch * n_val
    target_calls = n_val + t.epochs * per_epoch + slow_updates * per_slow_update + 2 * n_test
    target_calls *= t.samples
    batch = min(t.batch_size, n_train)
    optimizer_calls = (
        steps * (math.ceil(batch / t.minibatch_size) + 1)
        + slow_updates
        + t.epochs * int(t.meta_skill)
    )

    target = baseline.get("target", RoleStats())
    judge = baseline.get("judge", RoleStats())
    runs = max(target.replies, 1)
    judge_calls = round(target_calls * judge.replies / runs)
    tokens_per_target = target.tokens / runs
    case_tokens = max(tokens_per_target - skill_tokens, 0)
    optimizer_prompt = 2 * skill_tokens + t.minibatch_size * case_tokens + TEMPLATE_TOKENS
    optimizer_tokens = optimizer_calls * (optimizer_prompt + OPTIMIZER_COMPLETION_TOKENS)

    cost = target_calls * _per_call(target) + judge_calls * _per_call(judge)
    unpriced = []
    if target.unpriced or judge.unpriced:
        unpriced.append(config.target.model if target.unpriced else config.optimizer.model)
    price = price_for(config.optimizer.model, config.prices)
    if price is None and config.optimizer.model in local:
        price = (0.0, 0.0)
    if price is None:
        if config.optimizer.model not in unpriced:
            unpriced.append(config.optimizer.model)
    else:
        cost += (
            optimizer_calls
            * (optimizer_prompt * price[0] + OPTIMIZER_COMPLETION_TOKENS * price[1])
            / 1_000_000
        )
    tokens = (
        target_calls * tokens_per_target
        + judge_calls * judge.tokens / max(judge.replies, 1)
        + optimizer_tokens
    )
    calls = {"target": target_calls, "optimizer": optimizer_calls}
    if judge_calls:
        calls["judge"] = judge_calls
    return Projection(calls, round(tokens), float(cost), tuple(unpriced))


def _per_call(stats: RoleStats) -> float:
    """Measured dollars per call (priced answers only)."""
    priced = stats.replies - stats.unpriced
    return float(stats.cost_exact) / priced if priced > 0 else 0.0


def refuse_unbudgeted(projection: Projection, run_id: str, budget_usd: float | None) -> None:
    """Stop a run without a budget whose projection is above ``UNBUDGETED_LIMIT_USD``."""
    if budget_usd is not None or projection.cost_usd <= UNBUDGETED_LIMIT_USD:
        return
    suggested = math.ceil(projection.cost_usd * 1.2)
    raise ProjectionTooHigh(
        f"Run {run_id} is projected to cost about ${projection.cost_usd:,.2f} "
        f"({projection.total_calls:,} calls, {projection.tokens:,} tokens), more than the "
        f"${UNBUDGETED_LIMIT_USD:.0f} a run without a budget may spend, so it stopped before "
        "its first step.",
        hint=f"To go on, resume it with a budget: 'skillvc train --budget-usd {suggested}' "
        "(the run continues from here); or start a smaller run with 'skillvc train --new "
        "--epochs 1'.",
    )
