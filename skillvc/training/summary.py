"""The end of a run and its words: the final test, ``RunSummary`` and the progress lines."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from skillvc.core.events import Event
from skillvc.models.usage import run_usage
from skillvc.training.evaluate import (
    GateResult,
)
from skillvc.training.speculation import Speculation
from skillvc.training.trainer_base import Usage, fmt_val


@dataclass
class RunSummary:
    run_id: str
    status: str
    resumed: bool
    steps: int = 0
    accepted: int = 0
    rejected: int = 0
    baseline_val: float | None = None
    best_val: float | None = None
    baseline_test: float | None = None
    test: float | None = None
    best_commit: str | None = None
    calls: int = 0
    fresh_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    # Input tokens the providers read from their prompt cache, and their share of all input.
    cached_tokens: int = 0
    cache_hit_ratio: float | None = None
    calls_saved_by_early_stop: int = 0
    calls_by_role: dict[str, int] = field(default_factory=dict)
    # Steps and slow updates are counted apart: accepted/rejected above are step candidates.
    slow_updates_accepted: int = 0
    slow_updates_rejected: int = 0
    # Calls that reached a model for rollouts started while a gate ran, which the gate's
    # acceptance made useless (speculation on rejection; not part of ``calls``).
    speculation_wasted_calls: int = 0
    # Each accepted (or forced) candidate and how sure its gain is: label, p-value, verdict,
    # edits kept and dropped by attribution.
    gains: list[dict[str, Any]] = field(default_factory=list)
    # Reflections whose optimizer answered, and those whose answer gave usable edits: a run
    # with answers and none usable failed to train (the CLI exits non-zero).
    reflections: int = 0
    reflections_usable: int = 0

    @property
    def optimizer_unusable(self) -> bool:
        return self.reflections > 0 and self.reflections_usable == 0


UP_TO_DATE = "up-to-date"


def up_to_date(finished: Event) -> RunSummary:
    """The summary of a finished run that training again would only repeat (no call made)."""
    known = {f.name for f in dataclasses.fields(RunSummary)}
    recorded = {k: v for k, v in finished.payload.items() if k in known}
    return RunSummary(run_id=str(finished.run_id), status=UP_TO_DATE, resumed=False, **recorded)


class Summaries(Speculation):
    def finish(self) -> RunSummary:
        self.log.step = None
        s, ctx = self.state, self.ctx
        if s.head != ctx.base_commit:
            self.repo.tag(f"{self.refs}{ctx.run_id}/best", s.head)
        baseline_test = test = None
        if ctx.test:
            self.phase = "the test evaluation"
            runs = [(ctx.base_skill, ctx.test, "test"), (s.skill, ctx.test, "test")]
            self.prefetch(s.skill, ctx.test, "test")  # the seed's were sent with the baseline
            with self.stage("final test (seed and best skill)", runs):
                baseline_test = self.mean_of(self.rollouts(ctx.base_skill, ctx.test, "test"))
                test = self.mean_of(self.rollouts(s.skill, ctx.test, "test"))
        totals = self.client.totals()
        self.ahead.close()  # every speculation has ended: its wasted calls are all counted
        # The one definition of a run's calls, tokens and cost, as `runs` and `report` read it.
        usage = run_usage(self.store, ctx.run_id)
        summary = RunSummary(
            run_id=ctx.run_id,
            status="finished",
            resumed=ctx.resumed,
            steps=s.step,
            accepted=s.accepted,
            rejected=s.rejected,
            baseline_val=self.mean_of(self.baseline),
            best_val=s.current_val,
            baseline_test=baseline_test,
            test=test,
            best_commit=s.head,
            calls=totals.replies,
            fresh_calls=usage.calls,
            tokens=usage.tokens,
            cost_usd=usage.cost_usd,
            unpriced_calls=usage.unpriced_calls,
            cached_tokens=usage.cached_tokens,
            cache_hit_ratio=usage.cache_hit_ratio,
            calls_saved_by_early_stop=s.calls_saved,
            calls_by_role={role: st.replies for role, st in sorted(self.client.snapshot().items())},
            slow_updates_accepted=s.slow_accepted,
            slow_updates_rejected=s.slow_rejected,
            speculation_wasted_calls=self.ahead.wasted_calls(),
            gains=self.gains,
            reflections=s.reflections,
            reflections_usable=s.reflections_usable,
        )
        self.finish_commit()  # a rejected last candidate's, written beside the test and this
        self.log.emit(
            "run.finished",
            {
                key: getattr(summary, key)
                for key in (
                    "baseline_val",
                    "best_val",
                    "baseline_test",
                    "test",
                    "best_commit",
                    "steps",
                    "accepted",
                    "rejected",
                    "calls",
                    "tokens",
                    "cost_usd",
                    "unpriced_calls",
                    "calls_saved_by_early_stop",
                    "slow_updates_accepted",
                    "slow_updates_rejected",
                )
            }
            # Said only when it happened, so other runs' events are as they were.
            | ({"optimizer_unusable": s.reflections} if summary.optimizer_unusable else {}),
        )
        return summary

    def report(self, epoch: int, lr: int, edits: str, verdict: str, before: Usage) -> None:
        usage = self.usage_since(before)
        cost = "price unknown" if usage["cost_usd"] is None else f"${usage['cost_usd']:.4f}"
        self.progress.note(
            f"epoch {epoch}/{self.t.epochs} step {self.state.step}/{self.total_steps} lr {lr} | "
            f"{edits} | {verdict} | calls {sum(usage['calls'].values())} "
            f"tokens {usage['tokens']:,} {cost} | {time.monotonic() - self.started:.1f}s elapsed"
        )

    def verdict_line(self, result: GateResult) -> str:
        if result.early_stopped:
            # The mean over the items evaluated (those the current skill fails come first) says
            # little; the best mean the candidate could still have reached is what decided.
            after = (
                f"at most {fmt_val(result.after_bound)} "
                f"(stopped early after {result.n_evaluated} of {result.n})"
            )
        else:
            after = fmt_val(result.after)
        return f"val {fmt_val(result.before)} -> {after} {result.decision}"
