"""The run's guards: the projection before the first step, the budget, and failed calls.

``project`` refuses an unbudgeted run or one projected over budget before any step;
``check_budget`` stops between steps once the budget is spent; ``check_failures`` stops a run
whose calls keep failing, and ``record`` runs that check before it logs fresh rollouts. None
of them changes an event of a run that goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from skillvc.core.errors import BudgetExceeded, RunFailed
from skillvc.models.calls import RoleStats
from skillvc.skill.preflight import estimate_tokens
from skillvc.training.evaluate import Rollout
from skillvc.training.matrix_gate import matrix_projection
from skillvc.training.projection import ProjectionTooHigh, project, refuse_unbudgeted
from skillvc.training.trainer_base import TrainerBase, Usage


class Budget(TrainerBase):
    def project(self) -> None:
        """Log and show what the run will cost; stop a costly run that has no budget."""
        recorded = self.store.query(
            "SELECT type FROM events WHERE run_id = ? AND seq = ?",
            [self.ctx.run_id, self.log.seq + 1],
        )
        if recorded and recorded[0]["type"] != "run.projected":
            return  # a run started by a skillvc without projections: replay it as it was
        projection = project(
            self.config,
            self.client.snapshot(),
            n_train=len(self.ctx.train),
            n_val=len(self.ctx.val),
            n_test=len(self.ctx.test),
            n_slow=len(self.slow_items),
            skill_tokens=estimate_tokens(self.target_text(self.ctx.base_skill).encode("utf-8")),
            local=[getattr(self.config, role).model for role in self.client.servers],
        )
        matrix = matrix_projection(self.config, len(self.ctx.val), self.total_steps)
        self.log.emit("run.projected", projection.to_dict() | matrix)
        for name, calls in matrix.get("matrix_calls", {}).items():
            self.progress.note(f"projected matrix gate on {name}: at most {calls:,} target calls")
        self.progress.note(
            f"projected for run {self.ctx.run_id}: about {projection.sentence()} "
            "(an upper estimate)"
        )
        try:
            refuse_unbudgeted(projection, self.ctx.run_id, self.t.budget_usd)
        except ProjectionTooHigh as exc:
            self.log.note("run.stopped", {"reason": "projection", "message": exc.message})
            raise

    def target_text(self, skill: str) -> str:
        """All the text the target gets of a skill version (a package: its rendering)."""
        if self.render is None:
            return skill
        given = self.render(skill)
        return given.system + "".join(f.text or "" for f in given.files)

    def check_failures(self, errors: int, total: int, role: str) -> None:
        """Stop the run when too many calls of ``role`` failed: an outage of the optimizer
        must not quietly turn every step into an empty one, as one of the target must not
        turn into scores."""
        if total and errors / total > self.t.max_failure_rate:
            message = (
                f"{errors} of {total} {role} calls failed in {self.phase} "
                f"(last error: {(self.client.last_error or 'unknown').rstrip('.')})."
            )
            self.log.note("run.stopped", {"reason": "failures", "message": message})
            raise RunFailed(message, hint=failure_hint(self.client.last_error, role))

    def check_budget(self) -> None:
        budget = self.t.budget_usd
        if budget is None:
            return
        spent = self.client.totals().cost_usd + self.ahead.wasted_cost()
        if spent >= budget:
            self.log.note(
                "run.stopped",
                {
                    "reason": "budget",
                    "cost_usd": spent,
                    "budget_usd": budget,
                    "step": self.state.step,
                },
            )
            raise BudgetExceeded(
                f"Run {self.ctx.run_id} stopped after step {self.state.step}: it has cost "
                f"${spent:.4f} of its ${budget:.4f} budget."
            )

    def usage_since(self, before: Usage) -> dict[str, Any]:
        """Calls (per role), tokens and cost since ``before``; None cost when a price is
        unknown. Counts answers from the log too, so a resumed run reports the same."""
        calls: dict[str, int] = {}
        tokens, cost, unknown = 0, Fraction(0), False
        # Sorted roles and exact sums: the roles' order in the snapshot is the order threads
        # first used them, which must not show in a commit message.
        for role, now in sorted(self.client.snapshot().items()):
            was = before.get(role, RoleStats())
            if now.replies - was.replies:
                calls[role] = now.replies - was.replies
            tokens += now.tokens - was.tokens
            cost += now.cost_exact - was.cost_exact
            unknown |= now.unpriced > was.unpriced
        return {"calls": calls, "tokens": tokens, "cost_usd": None if unknown else float(cost)}

    def record(self, split: str, rollouts: Sequence[Rollout]) -> None:
        """Log fresh rollouts, after checking their failure rate.

        The check comes first so a run that stops for failures has not logged the failed
        rollouts: on resume they are retried rather than replayed.
        """
        self.check_failures(sum(1 for r in rollouts if not r.ok), len(rollouts), "target")
        with self.store.transaction():  # one write for the stage, not one per rollout
            self.record_rollouts(split, rollouts)

    def record_rollouts(self, split: str, rollouts: Sequence[Rollout]) -> None:
        for r in rollouts:
            payload = {
                "split": split,
                "item": r.item_id,
                "skill": r.skill,
                "output": self.store.put_blob(r.output) if r.output is not None else None,
                "hard": r.hard,
                "soft": r.soft,
                "error": r.error,
                "call": r.call_key,
                "reason": r.reason,
            }
            if r.activated is not None:  # an agent harness's rollout
                payload |= {"activated": r.activated, "trajectory": r.trajectory}
            self.log.emit("rollout", payload)


def failure_hint(last_error: str | None, role: str) -> str | None:
    """What to do about a run stopped by failed calls: a 404 (the server has no model by that
    name) gets ``skillvc doctor``'s hint; anything else the generic one (None)."""
    if last_error is None or "HTTP 404" not in last_error:
        return None
    section = role if role in ("target", "optimizer") else "optimizer"  # the judge's model
    return (
        f"Check the model name in [{section}] of skillvc.toml ('skillvc doctor' names the models "
        "the server serves), then run 'skillvc train' again."
    )
